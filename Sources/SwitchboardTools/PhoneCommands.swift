import Synchronization
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime

/// The session descriptions the command-line phones put in their offers and answers: one
/// audio stream, PCMU/PCMA and telephone-event, with the direction that expresses hold.
public enum PhoneSDP {
    /// An offer from `address` (RTP port `port`) with `direction` (`sendrecv`, `sendonly`…).
    public static func offer(address: String, port: UInt16, direction: String = "sendrecv", version: Int = 1) -> SessionBody {
        .sdp(describe(address: address, port: port, direction: direction, version: version))
    }

    /// An answer to `offer`: the direction mirrored (sendonly → recvonly, inactive stays).
    public static func answer(to offer: SessionBody, address: String, port: UInt16, version: Int = 1) -> SessionBody {
        let text = String(decoding: offer.bytes, as: UTF8.self)
        let direction: String
        if text.contains("a=sendonly") { direction = "recvonly" }
        else if text.contains("a=recvonly") { direction = "sendonly" }
        else if text.contains("a=inactive") { direction = "inactive" }
        else { direction = "sendrecv" }
        return .sdp(describe(address: address, port: port, direction: direction, version: version))
    }

    /// The direction attribute of a description, `sendrecv` when none is written.
    public static func direction(of body: SessionBody) -> String {
        let text = String(decoding: body.bytes, as: UTF8.self)
        for d in ["sendonly", "recvonly", "inactive"] where text.contains("a=\(d)") { return d }
        return "sendrecv"
    }

    static func describe(address: String, port: UInt16, direction: String, version: Int) -> String {
        let ipv = address.contains(":") ? "IP6" : "IP4"
        return "v=0\r\no=switchboard 1 \(version) IN \(ipv) \(address)\r\ns=switchboard\r\nc=IN \(ipv) \(address)\r\nt=0 0\r\n"
            + "m=audio \(port) RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
            + "a=fmtp:101 0-16\r\na=ptime:20\r\na=\(direction)\r\n"
    }
}

/// Draws messages between named hosts as a ladder in the terminal.
public struct LadderPrinter: Sendable {
    public let names: [String]
    public let width: Int

    public init(names: [String], width: Int = 24) {
        self.names = names
        self.width = width
    }

    /// The header line with the host names.
    public var header: String {
        "  time  " + names.map { pad($0, width) }.joined()
    }

    /// One arrow from `from` to `to` labelled with the message's first line (short form).
    public func line(time: Duration, from: String, to: String, message: SIPMessage) -> String {
        let label = Self.label(message)
        let t = Double(time.components.seconds) + Double(time.components.attoseconds) / 1e18
        let stamp = String(Int(t * 1000)).leftPadded(6) + "ms "
        guard let a = names.firstIndex(of: from), let b = names.firstIndex(of: to), a != b else {
            return stamp + "\(from) -> \(to): \(label)"
        }
        let lo = min(a, b), hi = max(a, b)
        var row = Array(repeating: Character(" "), count: names.count * width)
        for i in names.indices { row[i * width + width / 2] = "|" }
        let start = lo * width + width / 2, end = hi * width + width / 2
        for x in (start + 1)..<end { row[x] = "-" }
        if a < b { row[end - 1] = ">" } else { row[start + 1] = "<" }
        let text = Array(" \(label) ")
        let room = end - start - 3
        let shown = text.count <= room ? text : Array(text.prefix(room))
        let offset = start + 2 + max(0, (room - shown.count) / 2)
        for (i, c) in shown.enumerated() { row[offset + i] = c }
        return stamp + String(row)
    }

    /// `INVITE (sdp)`, `200 INVITE`, …
    public static func label(_ m: SIPMessage) -> String {
        let sdp = m.body.isEmpty ? "" : " (sdp)"
        if let code = m.statusCode {
            let method = (try? m.cseq().method.token) ?? ""
            return "\(code) \(method)\(sdp)"
        }
        return (m.method?.token ?? "?") + sdp
    }

    private func pad(_ s: String, _ n: Int) -> String {
        let left = max(0, (n - s.count) / 2)
        return String(repeating: " ", count: left) + s + String(repeating: " ", count: max(0, n - left - s.count))
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

extension SessionState {
    /// A short label for the command line.
    public var label: String {
        switch self {
        case .idle: return "idle"
        case .calling: return "calling"
        case .proceeding(let c): return c == 180 ? "ringing (180)" : "proceeding (\(c))"
        case .incoming: return "incoming"
        case .early: return "early"
        case .connecting: return "connecting"
        case .confirmed: return "confirmed"
        case .terminating: return "terminating"
        case .terminated(let r): return "ended: \(r.label)"
        }
    }
}

extension SessionEndReason {
    public var label: String {
        switch self {
        case .localHangup: return "we hung up"
        case .remoteHangup: return "the peer hung up"
        case .cancelled: return "cancelled"
        case .remoteCancelled: return "cancelled by the caller"
        case .rejected(let c): return "rejected \(c)"
        case .declined(let c): return "declined \(c)"
        case .timeout: return "no answer (timeout)"
        case .noAck: return "no ACK"
        case .sessionExpired: return "session expired"
        case .transportError: return "transport error"
        case .dialogGone(let c): return "dialog gone (\(c))"
        case .authenticationFailed(let why): return "authentication failed: \(why)"
        }
    }
}

/// A user agent with a phone's behaviour for the command line and the demo: it answers the
/// peer's offers (hold is answered with the mirrored direction), optionally answers incoming
/// calls after ringing, and reports what happens through `report`.
public final class Phone: Sendable {
    public let agent: SIPUserAgent
    public let name: String
    private let report: @Sendable (String) -> Void
    private let autoAnswer: Duration?
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let states = Mutex<[SessionKey: [SessionState]]>([:])
    private let incoming = Mutex<[SessionKey]>([])
    private let registration = Mutex<[RegistrationClient.State]>([])
    private let traces = Mutex<[(SIPMessage, Bool, SIPPeer)]>([])

    /// - Parameters:
    ///   - autoAnswer: answer incoming calls after ringing this long (nil: leave them ringing).
    ///   - report: one line per state change.
    ///   - trace: every message sent and received, with the peer.
    public init(name: String, configuration: SIPUserAgent.Configuration, autoAnswer: Duration? = nil,
                report: @escaping @Sendable (String) -> Void = { _ in },
                trace: (@Sendable (SIPMessage, Bool, SIPPeer) -> Void)? = nil) throws {
        agent = try SIPUserAgent(configuration: configuration, tracing: trace != nil)
        self.name = name
        self.report = report
        self.autoAnswer = autoAnswer
        let t = Task { [agent, weak self] in
            for await e in agent.events {
                guard let self else { return }
                if case .trace(let m, let out, let peer) = e { trace?(m, out, peer) } else { await self.handle(e) }
            }
        }
        task.withLock { $0 = t }
    }

    public func close() {
        agent.close()
        task.withLock { $0?.cancel() }
    }

    /// The local RTP port written in our descriptions (no media flows in these commands).
    private var mediaPort: UInt16 { UInt16(truncatingIfNeeded: Int(agent.endpoint.localAddresses[0].address.port) &+ 2) }
    private var mediaAddress: String { agent.endpoint.localAddresses[0].address.ipString }

    /// Our offer with a direction.
    public func offer(_ direction: String = "sendrecv", version: Int = 1) -> SessionBody {
        PhoneSDP.offer(address: mediaAddress, port: mediaPort, direction: direction, version: version)
    }

    private func handle(_ e: SIPUserAgent.Event) async {
        switch e {
        case .incomingCall(let key, let m):
            incoming.withLock { $0.append(key) }
            let from = (try? m.from().uri.description) ?? "?"
            report("\(name): incoming call from \(from)")
            if let delay = autoAnswer {
                try? await agent.perform(key) { s throws(SessionError) in try s.provisional(180) }
                // Ring in a task of its own: this loop keeps handling events meanwhile.
                Task { [agent, mediaAddress, mediaPort] in
                    try? await Task.sleep(for: delay)
                    let offer = await agent.session(key)?.remoteBody
                    let body = offer.map { PhoneSDP.answer(to: $0, address: mediaAddress, port: mediaPort) } ?? self.offer()
                    try? await agent.perform(key) { s throws(SessionError) in try s.accept(body: body) }
                }
            }
        case .session(let key, let ev):
            switch ev {
            case .stateChanged(let s):
                states.withLock { $0[key, default: []].append(s) }
                report("\(name): \(s.label)")
            case .remoteOffer(let b, let method):
                // Answer re-INVITEs and UPDATEs (and a 2xx offer to our offerless INVITE); the
                // initial INVITE's offer is answered by accept.
                if await agent.session(key)?.state != .incoming {
                    report("\(name): peer offers \(PhoneSDP.direction(of: b)) in \(method.token)")
                    let answer = PhoneSDP.answer(to: b, address: mediaAddress, port: mediaPort, version: 2)
                    try? await agent.perform(key) { s throws(SessionError) in try s.answer(answer) }
                }
            case .offerRequested:
                try? await agent.perform(key) { [offer = self.offer()] s throws(SessionError) in try s.answer(offer) }
            case .remoteAnswer(let b):
                report("\(name): peer answers \(PhoneSDP.direction(of: b))")
            case .request(let m, let tx):
                try? await agent.perform(key) { s throws(SessionError) in s.respond(to: m, in: tx, statusCode: 200) }
            case .requestCompleted(let method, let code, _):
                report("\(name): \(method.token) → \(code)")
            case .glare(let d):
                report("\(name): glare (491), retrying in \(d)")
            default:
                break
            }
        case .registration(let s):
            registration.withLock { $0.append(s) }
            report("\(name): \(s.label)")
        case .request, .trace:
            break
        }
    }

    /// The states a session went through.
    public func states(_ key: SessionKey) -> [SessionState] { states.withLock { $0[key] ?? [] } }

    /// Incoming calls so far.
    public var incomingCalls: [SessionKey] { incoming.withLock { $0 } }

    public var registrationStates: [RegistrationClient.State] { registration.withLock { $0 } }

    /// Waits (bounded) for a condition; returns whether it held in time.
    public func wait(timeout: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while clock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }

    /// Waits until the session reaches a state matching `match`.
    public func wait(_ key: SessionKey, timeout: Duration, for match: @escaping @Sendable (SessionState) -> Bool) async -> Bool {
        await wait(timeout: timeout) { self.states(key).contains(where: match) }
    }
}

/// `switchboard demo`: a registrar/proxy and two phones on 127.0.0.1. Alice registers with
/// digest authentication; Bob calls her through the proxy; she answers; Bob holds and resumes
/// by re-INVITE; Alice hangs up. Every message on the wire is printed as a ladder.
public enum DemoRun {
    /// Runs the demo, printing through `output`; returns whether every step happened.
    public static func run(output: @escaping @Sendable (String) -> Void) async throws -> Bool {
        let box = Mutex<ProxyServer?>(nil)
        let proxyEndpoint = try SIPEndpoint(configuration: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))])) { e in
            box.withLock { $0 }?.handle(e)
        }
        defer { proxyEndpoint.close() }
        let proxy = ProxyServer(configuration: .init(domain: "switchboard.test", users: ["alice": "alicepw", "bob": "bobpw"]))
        proxy.attach(proxyEndpoint)
        box.withLock { $0 = proxy }
        let proxyPeer = proxyEndpoint.localAddresses[0]
        let proxyURI = try SIPURI("sip:127.0.0.1:\(proxyPeer.address.port)")

        let names = Mutex<[UInt16: String]>([proxyPeer.address.port: "registrar/proxy"])
        let ladder = LadderPrinter(names: ["alice", "registrar/proxy", "bob"])
        let start = ContinuousClock.now
        let trace: @Sendable (String) -> @Sendable (SIPMessage, Bool, SIPPeer) -> Void = { me in
            { m, outgoing, peer in
                let other = names.withLock { $0[peer.address.port] } ?? "\(peer.address)"
                // Each message is drawn once: by its sender, or by its receiver when the proxy sent it.
                guard outgoing || other == "registrar/proxy" else { return }
                output(ladder.line(time: ContinuousClock.now - start, from: outgoing ? me : other, to: outgoing ? other : me, message: m))
            }
        }
        func config(_ user: String, _ password: String) throws -> SIPUserAgent.Configuration {
            .init(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))]), identity: try SIPURI("sip:\(user)@switchboard.test"),
                  credentials: DigestClient(username: user, password: password), outboundProxy: proxyURI, sessionTimer: nil)
        }
        let notes: @Sendable (String) -> Void = { output("          · " + $0) }
        let alice = try Phone(name: "alice", configuration: try config("alice", "alicepw"), autoAnswer: .milliseconds(300), report: notes, trace: trace("alice"))
        let bob = try Phone(name: "bob", configuration: try config("bob", "bobpw"), report: notes, trace: trace("bob"))
        defer { alice.close(); bob.close() }
        names.withLock {
            $0[alice.agent.endpoint.localAddresses[0].address.port] = "alice"
            $0[bob.agent.endpoint.localAddresses[0].address.port] = "bob"
        }
        output("registrar/proxy on udp:\(proxyPeer.address), alice on udp:\(alice.agent.endpoint.localAddresses[0].address), bob on udp:\(bob.agent.endpoint.localAddresses[0].address)")
        output(ladder.header)

        await alice.agent.register(registrar: try SIPURI("sip:switchboard.test"), peer: proxyPeer, expires: 600)
        guard await alice.wait(timeout: .seconds(10), { alice.registrationStates.contains { if case .registered = $0 { return true } else { return false } } }) else {
            output("alice did not register"); return false
        }
        let key = await bob.agent.call(try SIPURI("sip:alice@switchboard.test"), offer: bob.offer())
        guard await bob.wait(key, timeout: .seconds(10), for: { $0 == .confirmed }) else { output("the call was not answered"); return false }
        try await Task.sleep(for: .milliseconds(300))
        try await bob.agent.perform(key) { [o = bob.offer("sendonly", version: 2)] s throws(SessionError) in try s.reinvite(body: o) }
        try await Task.sleep(for: .milliseconds(300))
        try await bob.agent.perform(key) { [o = bob.offer("sendrecv", version: 3)] s throws(SessionError) in try s.reinvite(body: o) }
        try await Task.sleep(for: .milliseconds(300))
        guard let ak = alice.incomingCalls.first else { return false }
        try await alice.agent.perform(ak) { s throws(SessionError) in try s.bye() }
        let ended = await bob.wait(key, timeout: .seconds(10)) { $0 == .terminated(.remoteHangup) }
        await alice.agent.unregister()
        _ = await alice.wait(timeout: .seconds(5)) { alice.registrationStates.last == .unregistered }
        let s = proxy.statistics
        output("proxy: \(s.registers) REGISTER, \(s.forwarded) requests forwarded, \(s.acks) ACKs, \(s.relayedResponses) responses relayed")
        return ended
    }
}
