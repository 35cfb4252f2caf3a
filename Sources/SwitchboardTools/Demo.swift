import Synchronization
import SIPMessage
import SDP
import SIPTransaction
import SIPTransport
import SIPAuth
import SIPDialog
import SIPRuntime
import MediaRuntime
import Media
import NetworkIO

import Switchboard
import SIPProxy

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
        let start = MonotonicClock.now
        let trace: @Sendable (String) -> @Sendable (SIPMessage, Bool, SIPPeer) -> Void = { me in
            { m, outgoing, peer in
                let other = names.withLock { $0[peer.address.port] } ?? "\(peer.address)"
                // Each message is drawn once: by its sender, or by its receiver when the proxy sent it.
                guard outgoing || other == "registrar/proxy" else { return }
                output(ladder.line(time: MonotonicClock.now - start, from: outgoing ? me : other, to: outgoing ? other : me, message: m))
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

        let registrar = try SIPURI("sip:switchboard.test")
        do throws(RegistrationError) {
            try await alice.register(with: registrar, peer: proxyPeer, expires: 600, timeout: .seconds(10))
        } catch {
            output("alice did not register: \(error)"); return false
        }
        let call = await bob.dial(try SIPURI("sip:alice@switchboard.test"))
        guard (try? await call.waitUntil("call", timeout: .seconds(10)) { $0.isEstablished }) != nil else {
            output("the call was not answered"); return false
        }
        try await Task.sleep(for: .milliseconds(300))
        try await call.setHeld(true, timeout: .seconds(10))
        try await Task.sleep(for: .milliseconds(300))
        try await call.setHeld(false, timeout: .seconds(10))
        try await Task.sleep(for: .milliseconds(300))
        guard let answered = alice.calls.first else { return false }
        await answered.hangUp(timeout: .seconds(10))
        let end = try? await call.waitUntil("hang up", timeout: .seconds(10)) { $0.isEnded }
        let ended = end == .ended(.hungUp(by: .remote))
        await alice.unregister(timeout: .seconds(5))
        let s = proxy.statistics
        output("proxy: \(s.registers) REGISTER, \(s.forwarded) requests forwarded, \(s.acks) ACKs, \(s.relayedResponses) responses relayed")
        return ended
    }
}
