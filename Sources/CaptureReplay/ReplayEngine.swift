import SIPMessage
import SIPTransport
import PacketCapture
import NetworkIO
import CaptureAnalysis
import Logging

/// The UA that replays one side: its socket, the live dialog, the client transactions of the
/// requests it sent and the requests the device sent it. Used by one task only.
final class Engine {
    typealias Difference = CaptureReplay.Difference

    /// A request we sent and its retransmission state (RFC 3261 §17.1.1.2 timers A/B, §17.1.2.2 E/F).
    struct ClientTransaction {
        var branch: String
        var method: SIPMethod
        var capturedCSeq: UInt32
        var liveCSeq: Int64
        var bytes: [UInt8]
        var requestURI: String
        var from: String
        var to: String
        var routes: [String]
        var destination: SocketAddress
        var nextSend: ContinuousClock.Instant?
        var interval: Duration
        var deadline: ContinuousClock.Instant
        var provisionals: Set<String> = []
        var final: Int?
        var timedOut = false
        var ack: [UInt8]?
        var finalToTag: String?
        /// The TCP/TLS connection the request went on.
        var connection: ConnectionID?
    }

    /// A request of the device and our answer to it (a 2xx to INVITE retransmitted over UDP until
    /// the ACK, RFC 3261 §13.3.1.4).
    struct ServerRequest {
        var message: SIPMessage
        var source: SocketAddress
        /// The TCP/TLS connection it came on: its responses go back on it (RFC 3261 §18.2.2).
        var connection: ConnectionID?
        /// Our last response (sent again when the request is retransmitted).
        var answer: [UInt8]?
        /// Whether that response was final.
        var answered = false
        var nextSend: ContinuousClock.Instant?
        var interval: Duration = .zero
        var deadline: ContinuousClock.Instant?
    }

    let options: CaptureReplayOptions
    let me: CaptureEndpoint
    let capturedCallID: String
    var device: SocketAddress
    let socket: ReplaySocket
    let inbox: Inbox
    let local: SocketAddress
    var mediaSockets: [UDPTransport] = []
    let clock = ContinuousClock()

    /// The party's messages (steps) and what the capture had from the other party after each.
    let partyMessages: [CapturedSIPMessage]
    let capturedAnswers: [[CapturedSIPMessage]]
    /// The callee's side: the other party's messages before the party's first (the INVITE that
    /// the device must send us), and the device's live ones before our first step.
    let calleeSide: Bool
    let preamble: [CapturedSIPMessage]
    var liveBefore: [InboundMessage] = []
    /// The callee's side: the device's INVITE came, and its Call-ID, tags and route set are ours.
    var adopted = false
    /// The callee's side: To of our in-dialog requests (the INVITE's From, with its tag).
    var dialogTo: String?

    var callID: String
    let cseqOffset: Int64
    let myTag: String
    let capturedMyTag: String?
    let capturedPeerTag: String?
    var peerTag: String?
    var remoteTarget: String
    var routeSet: [String] = []
    var lastRSeq: UInt32?

    var clients: [ClientTransaction] = []
    var servers: [ServerRequest] = []
    var live: [[InboundMessage]]
    var sent: [Bool]
    var current = 0
    var datagramsSent = 0

    init(call: CapturedCall, me: CaptureEndpoint, relevant: [CapturedSIPMessage], device: SocketAddress, bindTo: SocketAddress,
         kind: TransportKind, options: CaptureReplayOptions) throws(CaptureReplayError) {
        self.options = options
        self.me = me
        self.device = device
        self.capturedCallID = call.callID
        let inbox = Inbox()
        self.inbox = inbox
        do {
            socket = try ReplaySocket(kind, at: bindTo, tls: options.tls, logger: options.logger, inbox: inbox)
        } catch {
            throw .socket("\(kind) \(bindTo): \(error)")
        }
        local = socket.localAddress
        var party: [CapturedSIPMessage] = [], answers: [[CapturedSIPMessage]] = [], before: [CapturedSIPMessage] = []
        for m in relevant {
            if m.source == me {
                party.append(m)
                answers.append([])
            } else if !answers.isEmpty {
                answers[answers.count - 1].append(m)
            } else {
                before.append(m)
            }
        }
        partyMessages = party
        capturedAnswers = answers
        preamble = before
        calleeSide = !before.isEmpty
        live = Array(repeating: [], count: party.count)
        sent = Array(repeating: false, count: party.count)
        callID = "replay-\(Self.token(16))@\(local.ipString)"
        cseqOffset = Int64.random(in: 1...20_000)
        myTag = Self.token(10)
        let initial = relevant.first { $0.message.method == .invite && $0.message.toTag == nil } ?? relevant[0]
        capturedMyTag = initial.message.fromTag
        capturedPeerTag = relevant.first { $0.source != me && !$0.message.isRequest && $0.message.toTag != nil }?.message.toTag
        remoteTarget = options.target.description
    }

    static func token(_ n: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<n).map { _ in alphabet.randomElement()! })
    }

    func close() {
        socket.close()
        for s in mediaSockets { s.close() }
    }

    // MARK: Running

    func run() async {
        if calleeSide {
            // Wait to be called: the device's INVITE gives the dialog its Call-ID and tags.
            current = -1
            await pump(until: clock.now + options.callWait) { $0.adopted }
            guard adopted else { return }
            await pump(until: clock.now + options.linger) { $0.satisfiedBefore() }
            current = 0
        }
        var previousSend: ContinuousClock.Instant?
        for (i, p) in partyMessages.enumerated() {
            if i > 0, let prev = previousSend {
                let gap = Duration.nanoseconds(max(0, p.timestamp.totalNanoseconds - partyMessages[i - 1].timestamp.totalNanoseconds))
                await pump(until: prev + min(gap, options.maxPause)) { _ in false }
            }
            current = i
            previousSend = clock.now
            sent[i] = send(p)
            let start = clock.now
            await pump(until: start + options.t1 * 64 + options.requestTimeout) { $0.satisfied(step: i, since: start) }
        }
        await pump(until: clock.now + options.linger) { _ in false }
        finishDialog()
    }

    /// Polls the socket and runs the timers until `deadline` or until `done`.
    func pump(until deadline: ContinuousClock.Instant, done: (Engine) -> Bool) async {
        while true {
            for m in inbox.take() { receive(m) }
            for id in inbox.takeClosed() { connectionClosed(id) }
            runTimers()
            if done(self) || clock.now >= deadline { return }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Whether the requests the capture had from the device before the party's first message
    /// have come (the INVITE, and a retransmission or a CANCEL only if captured).
    func satisfiedBefore() -> Bool {
        var used = Set<Int>()
        for q in preamble where q.message.isRequest {
            let want = Self.label(q.message)
            guard let k = liveBefore.indices.first(where: { !used.contains($0) && Self.label(liveBefore[$0].message) == want }) else { return false }
            used.insert(k)
        }
        return true
    }

    /// Whether every captured answer of step `i` has come live, or cannot come any more.
    func satisfied(step i: Int, since start: ContinuousClock.Instant) -> Bool {
        var used = Set<Int>()
        for q in capturedAnswers[i] {
            let want = Self.label(q.message)
            if let k = live[i].indices.first(where: { !used.contains($0) && Self.label(live[i][$0].message) == want }) {
                used.insert(k)
                continue
            }
            if q.message.isRequest {
                if clock.now < start + options.requestTimeout { return false }
            } else {
                // A response: satisfied once its transaction is over (final or timed out) or was never sent.
                guard let c = try? q.message.cseq(), let t = clients.last(where: { $0.capturedCSeq == c.sequence && $0.method == c.method }) else { continue }
                if t.final == nil && !t.timedOut { return false }
            }
        }
        return true
    }

    // MARK: Receiving

    func receive(_ m: InboundMessage) {
        if calleeSide && !adopted {
            guard m.message.method == .invite, m.message.toTag == nil, m.message.callID != nil else { return }
            adopt(m)
        }
        guard m.message.callID == callID else { return }
        options.logger.debug("replay received \(Self.label(m.message)) from \(m.source)")
        if m.message.isRequest { receiveRequest(m) } else { receiveResponse(m) }
    }

    func receiveResponse(_ m: InboundMessage) {
        guard let cseq = try? m.message.cseq(), let branch = m.message.topViaBranch,
              let i = clients.lastIndex(where: { $0.branch == branch && $0.method == cseq.method }) else { return }
        let code = m.message.statusCode ?? 0
        if clients[i].final != nil {
            // A retransmitted final response: the ACK again (INVITE), nothing else.
            if let ack = clients[i].ack { send(ack, to: clients[i].destination, on: clients[i].connection) }
            return
        }
        if code < 200 {
            let key = "\(code) \(m.message.firstValueBytes(.rseq).map { String(decoding: $0, as: UTF8.self) } ?? "")"
            guard clients[i].provisionals.insert(key).inserted else { return }
            if clients[i].method == .invite { clients[i].nextSend = nil } else { clients[i].interval = options.t2 }
            if let r = try? m.message.rseq() { lastRSeq = r }
        } else {
            clients[i].final = code
            clients[i].nextSend = nil
            clients[i].finalToTag = m.message.toTag
        }
        appendLive(m)
        if clients[i].method == .invite, let tag = m.message.toTag, code < 300 {
            if peerTag == nil || code >= 200 { peerTag = tag }
            if let contact = try? m.message.contact(), case .addresses(let a) = contact, let first = a.first {
                remoteTarget = first.uri.description
            }
            if code >= 200 || routeSet.isEmpty {
                routeSet = m.message.values(.recordRoute).flatMap { $0.split(separator: ",").map { String($0).trimmed } }.reversed()
            }
        }
        if clients[i].method == .invite && code >= 300 {
            // RFC 3261 §17.1.1.3: the transaction ACKs a non-2xx, on the INVITE's branch.
            let t = clients[i]
            var lines = ["ACK \(t.requestURI) SIP/2.0", "Via: SIP/2.0/\(socket.kind.viaToken) \(local);rport;branch=\(t.branch)", "Max-Forwards: 70", "From: \(t.from)",
                         "To: \(m.message[.to] ?? t.to)", "Call-ID: \(callID)", "CSeq: \(t.liveCSeq) ACK"]
            lines += t.routes.map { "Route: \($0)" }
            let ack = Self.serialize(lines, body: "")
            clients[i].ack = ack
            send(ack, to: t.destination, on: t.connection)
        }
    }

    /// The callee's side: the device's INVITE; its Call-ID, From tag, Contact and Record-Route
    /// (in order: we are the UAS, RFC 3261 §12.1.1) make the dialog the replayed side then uses.
    func adopt(_ m: InboundMessage) {
        adopted = true
        callID = m.message.callID ?? callID
        device = m.source
        peerTag = m.message.fromTag
        dialogTo = m.message[.from]
        if let contact = try? m.message.contact(), case .addresses(let a) = contact, let first = a.first {
            remoteTarget = first.uri.description
        }
        routeSet = m.message.values(.recordRoute).flatMap { $0.split(separator: ",").map { String($0).trimmed } }
        options.logger.debug("replay called by \(m.source), Call-ID \(callID)")
    }

    /// A live message of the device, filed under the step it followed (before the first: the preamble).
    func appendLive(_ m: InboundMessage) {
        if current < 0 { liveBefore.append(m) } else { live[current].append(m) }
    }

    func receiveRequest(_ m: InboundMessage) {
        let branch = m.message.topViaBranch
        let cseq = try? m.message.cseq()
        if m.message.method != .ack,
           let i = servers.firstIndex(where: { $0.message.topViaBranch == branch && (try? $0.message.cseq()) == cseq && $0.message.method == m.message.method }) {
            if let a = servers[i].answer { send(a, to: servers[i].source, on: servers[i].connection) }
            return
        }
        if m.message.method == .ack {
            // The ACK ends our 2xx's retransmissions; one retransmitted with the same branch is not new.
            for i in servers.indices where servers[i].message.method == .invite && (try? servers[i].message.cseq().sequence) == cseq?.sequence {
                servers[i].nextSend = nil
            }
            if servers.contains(where: { $0.message.method == .ack && $0.message.topViaBranch == branch }) { return }
        }
        if peerTag == nil { peerTag = m.message.fromTag }
        servers.append(ServerRequest(message: m.message, source: m.source, connection: m.connection))
        appendLive(m)
    }

    /// A TCP/TLS connection closed (refused, reset, a failed handshake): the requests on it
    /// still waiting for a final response fail at once, as a transport error (RFC 3261 §17.1.4).
    func connectionClosed(_ id: ConnectionID) {
        for i in clients.indices where clients[i].connection == id && clients[i].final == nil && !clients[i].timedOut {
            clients[i].timedOut = true
            options.logger.debug("replay: connection \(id) closed, \(clients[i].method) failed")
        }
    }

    func runTimers() {
        let now = clock.now
        for i in servers.indices {
            guard let next = servers[i].nextSend, let answer = servers[i].answer else { continue }
            if let d = servers[i].deadline, now >= d {
                servers[i].nextSend = nil
            } else if now >= next {
                send(answer, to: servers[i].source, on: servers[i].connection)
                servers[i].interval = min(servers[i].interval * 2, options.t2)
                servers[i].nextSend = now + servers[i].interval
            }
        }
        for i in clients.indices where clients[i].final == nil && !clients[i].timedOut {
            if now >= clients[i].deadline {
                clients[i].timedOut = true
                continue
            }
            if let next = clients[i].nextSend, now >= next {
                send(clients[i].bytes, to: clients[i].destination)
                clients[i].interval = clients[i].method == .invite ? clients[i].interval * 2 : min(clients[i].interval * 2, options.t2)
                clients[i].nextSend = now + clients[i].interval
            }
        }
    }

    // MARK: Sending

    /// Sends one message to `destination` (over TCP/TLS: on `connection` while it is open,
    /// otherwise on the connection to `destination`, opened if there is none); the connection used.
    @discardableResult
    func send(_ bytes: [UInt8], to destination: SocketAddress, on connection: ConnectionID? = nil) -> ConnectionID? {
        datagramsSent += 1
        do { return try socket.send(bytes, to: destination, on: connection) } catch {
            options.logger.debug("replay send to \(destination) failed: \(error)")
            return nil
        }
    }

    /// Our Contact: the listening address, with the transport for TCP and TLS (RFC 3261 §19.1.4).
    var contact: String {
        socket.kind == .udp ? "<sip:replay@\(local)>" : "<sip:replay@\(local);transport=\(socket.kind.rawValue)>"
    }

    /// Sends the live counterpart of the party's captured message; false when it cannot be
    /// (what it answers or acknowledges did not come).
    func send(_ p: CapturedSIPMessage) -> Bool {
        let text = SIPTextMessage(p.message)
        if !p.message.isRequest { return answer(p, text) }
        guard let method = p.message.method, let cseq = try? p.message.cseq() else { return false }
        switch method {
        case .ack:
            guard let i = clients.lastIndex(where: { $0.method == .invite && $0.capturedCSeq == cseq.sequence }), let code = clients[i].final else { return false }
            if code >= 300 { return clients[i].ack != nil }
            sendAck2xx(i, body: text.body, contentType: text.value("content-type"))
            return true
        case .cancel:
            guard let i = clients.lastIndex(where: { $0.method == .invite && $0.capturedCSeq == cseq.sequence }), clients[i].final == nil else { return false }
            let t = clients[i]
            var lines = ["CANCEL \(t.requestURI) SIP/2.0", "Via: SIP/2.0/\(socket.kind.viaToken) \(local);rport;branch=\(t.branch)", "Max-Forwards: 70", "From: \(t.from)",
                         "To: \(t.to)", "Call-ID: \(callID)", "CSeq: \(t.liveCSeq) CANCEL"]
            lines += t.routes.map { "Route: \($0)" }
            start(ClientTransaction(branch: t.branch, method: .cancel, capturedCSeq: cseq.sequence, liveCSeq: t.liveCSeq, bytes: Self.serialize(lines, body: ""),
                                    requestURI: t.requestURI, from: t.from, to: t.to, routes: t.routes, destination: t.destination,
                                    interval: options.t1, deadline: clock.now))
            return true
        default:
            let inDialog = p.message.toTag != nil
            // An in-dialog request needs the live dialog (a 2xx, or an early dialog still ringing).
            let dialog = clients.contains { $0.method == .invite && (($0.final ?? 0) / 100 == 2 || ($0.final == nil && peerTag != nil)) }
                || servers.contains { $0.message.method == .invite && $0.answer != nil }
            if inDialog && !dialog { return false }
            let uri = inDialog ? remoteTarget : options.target.description
            let branch = "z9hG4bK" + Self.token(16)
            let from = Self.retag(text.value("from") ?? "<sip:replay@\(local)>", to: myTag)
            let to = inDialog && dialogTo != nil ? dialogTo! : "<\(options.target)>" + (inDialog ? peerTag.map { ";tag=\($0)" } ?? "" : "")
            let liveCSeq = Int64(cseq.sequence) + cseqOffset
            let routes = inDialog ? routeSet : []
            var lines = ["\(method) \(uri) SIP/2.0", "Via: SIP/2.0/\(socket.kind.viaToken) \(local);rport;branch=\(branch)"]
            for (name, value) in text.headers {
                switch SIPTextMessage.canonical(name) {
                case "via", "route", "record-route", "authorization", "proxy-authorization", "content-length", "call-id", "cseq", "from", "to": continue
                case "contact": lines.append("Contact: \(contact)")
                case "rack":
                    let f = value.split(separator: " ")
                    let rseq = lastRSeq.map { "\($0)" } ?? (f.first.map(String.init) ?? "1")
                    let n = f.count > 1 ? (Int64(f[1]).map { "\($0 + cseqOffset)" } ?? String(f[1])) : "\(liveCSeq)"
                    lines.append("RAck: \(rseq) \(n) \(f.count > 2 ? String(f[2]) : "INVITE")")
                default: lines.append("\(name): \(value)")
                }
            }
            lines += ["From: \(from)", "To: \(to)", "Call-ID: \(callID)", "CSeq: \(liveCSeq) \(method)"]
            lines += routes.map { "Route: \($0)" }
            let bytes = Self.serialize(lines, body: rewriteSDP(text))
            start(ClientTransaction(branch: branch, method: method, capturedCSeq: cseq.sequence, liveCSeq: liveCSeq, bytes: bytes, requestURI: uri,
                                    from: from, to: to, routes: routes, destination: nextHop(routes),
                                    interval: options.t1, deadline: clock.now))
            return true
        }
    }

    /// Sends a new client transaction's request and arms its timers (UDP: retransmissions).
    func start(_ t: ClientTransaction) {
        var t = t
        let now = clock.now
        // RFC 3261 §17.1.1.2, §17.1.2.2: timers A and E (retransmissions) over unreliable transports only.
        t.nextSend = socket.kind.isReliable ? nil : now + options.t1
        t.deadline = now + options.t1 * 64
        t.connection = send(t.bytes, to: t.destination)
        clients.append(t)
        options.logger.debug("replay sent \(t.method) to \(t.destination)")
    }

    /// The ACK of a 2xx (RFC 3261 §13.2.2.4): a new transaction-less request to the remote
    /// target, through the route set, CSeq of the INVITE.
    func sendAck2xx(_ i: Int, body: String, contentType: String?) {
        let t = clients[i]
        let sdp = body.isEmpty ? "" : rewriteSDP(SIPTextMessage(body: body, contentType: contentType))
        var lines = ["ACK \(remoteTarget) SIP/2.0", "Via: SIP/2.0/\(socket.kind.viaToken) \(local);rport;branch=z9hG4bK\(Self.token(16))", "Max-Forwards: 70",
                     "From: \(t.from)", "To: <\(options.target)>\(t.finalToTag.map { ";tag=\($0)" } ?? "")", "Call-ID: \(callID)", "CSeq: \(t.liveCSeq) ACK"]
        lines += routeSet.map { "Route: \($0)" }
        if !sdp.isEmpty, let c = contentType { lines.append("Content-Type: \(c)") }
        let ack = Self.serialize(lines, body: sdp)
        clients[i].ack = ack
        send(ack, to: nextHop(routeSet))
    }

    /// The party's response to the device's request of the captured method (the oldest one not
    /// answered yet).
    func answer(_ p: CapturedSIPMessage, _ text: SIPTextMessage) -> Bool {
        guard let cseq = try? p.message.cseq(),
              let i = servers.firstIndex(where: { !$0.answered && $0.message.method == cseq.method && $0.message.method != .ack }) else { return false }
        let request = servers[i].message
        var lines = [text.startLine]
        lines += request.values(.via).map { "Via: \($0)" }
        lines.append("From: \(request[.from] ?? "")")
        let to = request[.to] ?? ""
        lines.append("To: \(request.toTag == nil && (p.message.statusCode ?? 0) > 100 ? to + ";tag=\(myTag)" : to)")
        lines += ["Call-ID: \(callID)", "CSeq: \(request[.cseq] ?? "")"]
        let code = p.message.statusCode ?? 0
        // RFC 3261 §12.1.1: a response that makes a dialog (1xx with a tag, 2xx) echoes Record-Route.
        if request.method == .invite, code > 100, code < 300 { lines += request.values(.recordRoute).map { "Record-Route: \($0)" } }
        for (name, value) in text.headers {
            switch SIPTextMessage.canonical(name) {
            case "via", "from", "to", "call-id", "cseq", "content-length", "record-route": continue
            case "contact": lines.append("Contact: \(contact)")
            default: lines.append("\(name): \(value)")
            }
        }
        let bytes = Self.serialize(lines, body: rewriteSDP(text))
        servers[i].answer = bytes
        servers[i].answered = code >= 200
        if request.method == .invite, (200..<300).contains(code), !socket.kind.isReliable {
            let now = clock.now
            servers[i].interval = options.t1
            servers[i].nextSend = now + options.t1
            servers[i].deadline = now + options.t1 * 64
        }
        send(bytes, to: servers[i].source, on: servers[i].connection)
        return true
    }

    /// At the end: an ACK for a 2xx the capture did not ACK, a 200 for a request it did not answer.
    func finishDialog() {
        for i in clients.indices where clients[i].method == .invite && clients[i].ack == nil && (clients[i].final ?? 0) / 100 == 2 {
            sendAck2xx(i, body: "", contentType: nil)
        }
        for i in servers.indices where !servers[i].answered && servers[i].message.method != .ack {
            let r = servers[i].message
            var lines = ["SIP/2.0 200 OK"] + r.values(.via).map { "Via: \($0)" }
            lines += ["From: \(r[.from] ?? "")", "To: \(r[.to] ?? "")\(r.toTag == nil ? ";tag=\(myTag)" : "")", "Call-ID: \(callID)", "CSeq: \(r[.cseq] ?? "")"]
            let bytes = Self.serialize(lines, body: "")
            servers[i].answer = bytes
            servers[i].answered = true
            send(bytes, to: servers[i].source, on: servers[i].connection)
        }
    }

    func nextHop(_ routes: [String]) -> SocketAddress {
        guard let first = routes.first, let open = first.firstIndex(of: "<"), let close = first.firstIndex(of: ">"), open < close,
              let uri = try? SIPURI(String(first[first.index(after: open)..<close])),
              let ip = IPAddress(uri.host.description.trimmingBrackets) else { return device }
        return SocketAddress(ip, port: uri.port ?? 5060)
    }

    /// The SDP body with our address in `o=`/`c=` and a socket of ours behind each `m=` port
    /// (the device's media arrives there and is dropped); other bodies unchanged.
    func rewriteSDP(_ t: SIPTextMessage) -> String {
        guard !t.body.isEmpty, t.value("content-type")?.lowercased().hasPrefix("application/sdp") == true else { return t.body }
        var lines = t.body.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map {
            String(String.UnicodeScalarView($0.last == "\r" ? $0.dropLast() : $0))
        }
        if lines.last == "" { lines.removeLast() }
        let family = local.isIPv6 ? "IP6" : "IP4"
        var media = 0
        let out = lines.map { line -> String in
            var f = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            if (line.hasPrefix("c=") || line.hasPrefix("o=")), f.count >= 3, f[f.count - 3].hasSuffix("IN") {
                f[f.count - 2] = family
                f[f.count - 1] = local.ipString
                return f.joined(separator: " ")
            }
            if line.hasPrefix("m="), f.count >= 2, f[1] != "0" {
                f[1] = "\(mediaPort(media))"
                media += 1
                return f.joined(separator: " ")
            }
            return line
        }
        return out.joined(separator: "\r\n") + "\r\n"
    }

    /// The port of our `n`th media socket (bound on first use).
    func mediaPort(_ n: Int) -> UInt16 {
        while mediaSockets.count <= n {
            guard let s = try? UDPTransport(bindingTo: local.withPort(0), handler: { _ in }) else { return 9 }
            mediaSockets.append(s)
        }
        return mediaSockets[n].localAddress.port
    }

    static func serialize(_ lines: [String], body: String) -> [UInt8] {
        var text = lines.joined(separator: "\r\n") + "\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        text += body
        return Array(text.utf8)
    }

    /// A From/To value with its tag set to `tag`.
    static func retag(_ value: String, to tag: String) -> String {
        guard let r = value.firstRange(of: ";tag=") else { return value + ";tag=\(tag)" }
        let after = value[r.upperBound...]
        let end = after.firstIndex { $0 == ";" || $0 == " " || $0 == ">" || $0 == "," } ?? value.endIndex
        return String(value[..<r.lowerBound]) + ";tag=\(tag)" + String(value[end...])
    }

    /// `INVITE`, `200 INVITE`: how a message is named in steps and differences.
    static func label(_ m: SIPMessage) -> String {
        if m.isRequest { return m.method.map { "\($0)" } ?? "?" }
        let method = (try? m.cseq()).map { "\($0.method)" } ?? "?"
        return "\(m.statusCode ?? 0) \(method)"
    }

    // MARK: Report

    func report() -> CaptureReplay.Report {
        var steps: [CaptureReplay.Step] = []
        var differences: [Difference] = []
        // (step, message) of both sides; the captured responses to a request not sent are not expected.
        var expected: [(step: Int, message: SIPMessage)] = [], got: [(step: Int, message: SIPMessage)] = []
        // Before the first step (the callee's side): what the device had to send to start the call.
        expected += preamble.map { (-1, $0.message) }
        got += liveBefore.map { (-1, $0.message) }
        for i in partyMessages.indices {
            steps.append(CaptureReplay.Step(sent: Self.label(partyMessages[i].message), wasSent: sent[i],
                                            captured: capturedAnswers[i].map { Self.label($0.message) }, live: live[i].map { Self.label($0.message) }))
            let unsent = sent[i] ? nil : try? partyMessages[i].message.cseq()
            for q in capturedAnswers[i] where unsent == nil || q.message.isRequest || (try? q.message.cseq()) != unsent {
                expected.append((i, q.message))
            }
            got += live[i].map { (i, $0.message) }
        }
        var pairs: [(captured: Int, live: Int)] = []
        var usedExpected = Set<Int>(), usedGot = Set<Int>()
        // The same message in the same step, then in another step (the device was faster or slower).
        for sameStep in [true, false] {
            for (e, q) in expected.enumerated() where !usedExpected.contains(e) {
                let want = Self.label(q.message)
                if let g = got.indices.first(where: { !usedGot.contains($0) && (!sameStep || got[$0].step == q.step) && Self.label(got[$0].message) == want }) {
                    usedExpected.insert(e); usedGot.insert(g); pairs.append((e, g))
                }
            }
        }
        var found: [(step: Int, order: Int, difference: Difference)] = []
        for (e, g) in pairs {
            for d in Self.missingHeaders(captured: expected[e].message, live: got[g].message, step: expected[e].step + 1) {
                found.append((expected[e].step, e, d))
            }
        }
        // A final response of the same method with another code.
        for (e, q) in expected.enumerated() where !usedExpected.contains(e) && !q.message.isRequest && (q.message.statusCode ?? 0) >= 200 {
            guard let method = (try? q.message.cseq())?.method else { continue }
            if let g = got.indices.first(where: {
                !usedGot.contains($0) && !got[$0].message.isRequest && (got[$0].message.statusCode ?? 0) >= 200 && (try? got[$0].message.cseq())?.method == method
            }) {
                usedExpected.insert(e); usedGot.insert(g)
                found.append((q.step, e, Difference(kind: .statusDiffers, step: q.step + 1, captured: Self.label(q.message), live: Self.label(got[g].message))))
            }
        }
        for (e, q) in expected.enumerated() where !usedExpected.contains(e) {
            found.append((q.step, e, Difference(kind: .missing, step: q.step + 1, captured: Self.label(q.message))))
        }
        for (g, l) in got.enumerated() where !usedGot.contains(g) {
            found.append((l.step, expected.count + g, Difference(kind: .extra, step: l.step + 1, live: Self.label(l.message))))
        }
        for i in partyMessages.indices where !sent[i] {
            found.append((i, -1, Difference(kind: .notSent, step: i + 1, captured: Self.label(partyMessages[i].message))))
        }
        found.sort { ($0.step, $0.order) < ($1.step, $1.order) }
        differences = found.map(\.difference)
        return CaptureReplay.Report(capturedCallID: capturedCallID, callID: callID, party: me, device: device, local: local, steps: steps,
                                    differences: differences, datagramsSent: datagramsSent, transport: socket.kind)
    }

    static func displayName(_ canonical: String) -> String {
        ["contact": "Contact", "record-route": "Record-Route", "require": "Require", "rseq": "RSeq", "content-type": "Content-Type",
         "session-expires": "Session-Expires", "allow": "Allow", "supported": "Supported"][canonical] ?? canonical
    }

    /// The compared headers the captured message had and the live one lacks.
    static func missingHeaders(captured: SIPMessage, live: SIPMessage, step: Int) -> [Difference] {
        let c = SIPTextMessage(captured), l = SIPTextMessage(live)
        return CaptureReplay.comparedHeaders.filter { c.has($0) && !l.has($0) }.map {
            Difference(kind: .headerMissing, step: step, captured: label(captured), live: label(live), header: Self.displayName($0))
        }
    }
}

extension String {
    var trimmed: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
