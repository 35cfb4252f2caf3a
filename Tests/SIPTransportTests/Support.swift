import Glibc
import NetworkIO
import SIPMessage
import SIPTransport
import Synchronization

/// Collects a transport's events; tests wait on it with deadlines, never with bare sleeps.
final class EventRecorder: Sendable {
    private let events = Mutex<[TransportEvent]>([])

    /// The handler to give a transport.
    var handler: @Sendable (TransportEvent) -> Void {
        { [self] event in events.withLock { $0.append(event) } }
    }

    var all: [TransportEvent] { events.withLock { $0 } }

    var messages: [InboundMessage] {
        all.compactMap { if case .message(let m) = $0 { return m } else { return nil } }
    }

    var opened: [ConnectionInfo] {
        all.compactMap { if case .connectionOpened(let c) = $0 { return c } else { return nil } }
    }

    var closed: [(ConnectionInfo, ConnectionCloseReason)] {
        all.compactMap { if case .connectionClosed(let c, let r) = $0 { return (c, r) } else { return nil } }
    }

    /// Polls every millisecond until `predicate` holds or `timeout` passes; returns whether it held.
    @discardableResult
    func wait(timeout: Duration = .milliseconds(1500), until predicate: ([TransportEvent]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if predicate(all) { return true }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    func waitForMessages(_ count: Int, timeout: Duration = .milliseconds(1500)) async -> [InboundMessage] {
        await wait(timeout: timeout) { events in
            events.reduce(0) { n, e in if case .message = e { return n + 1 } else { return n } } >= count
        }
        return messages
    }
}

/// Polls `condition` until it holds or `timeout` passes.
@discardableResult
func eventually(timeout: Duration = .milliseconds(1500), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
}

enum Fixture {
    static func request(_ method: String = "OPTIONS", callID: String = "call-1@test", cseq: Int = 1, transport: String = "UDP", host: String = "127.0.0.1", body: String = "") -> [UInt8] {
        var text = "\(method) sip:bob@\(host) SIP/2.0\r\n"
        text += "Via: SIP/2.0/\(transport) \(host):5070;branch=z9hG4bK-\(callID.hashValue & 0xffff)-\(cseq)\r\n"
        text += "Max-Forwards: 70\r\n"
        text += "From: <sip:alice@\(host)>;tag=a1\r\n"
        text += "To: <sip:bob@\(host)>\r\n"
        text += "Call-ID: \(callID)\r\n"
        text += "CSeq: \(cseq) \(method)\r\n"
        text += "Contact: <sip:alice@\(host):5070>\r\n"
        if !body.isEmpty { text += "Content-Type: application/sdp\r\n" }
        text += "Content-Length: \(body.utf8.count)\r\n\r\n"
        text += body
        return Array(text.utf8)
    }

    static let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"

    static func response(to request: SIPMessage, code: Int = 200, reason: String = "OK") -> [UInt8] {
        var text = "SIP/2.0 \(code) \(reason)\r\n"
        for name in ["Via", "From", "To", "Call-ID", "CSeq"] {
            for value in request.values(SIPHeaderName(name)) { text += "\(name): \(value)\r\n" }
        }
        text += "Content-Length: 0\r\n\r\n"
        return Array(text.utf8)
    }
}

/// Whether IPv6 loopback (::1) can be bound here.
let ipv6LoopbackAvailable: Bool = {
    let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var sin6 = sockaddr_in6()
    sin6.sin6_family = sa_family_t(AF_INET6)
    sin6.sin6_addr = in6addr_loopback
    let rc = withUnsafePointer(to: &sin6) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
    }
    return rc == 0
}()

