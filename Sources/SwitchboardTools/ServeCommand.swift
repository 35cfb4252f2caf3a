import Synchronization
import SIPMessage
import SIPRuntime
import SIPTransaction
import SIPTransport
import SIPResolver
import SIPLoad
import Switchboard
import Logging
import NetworkIO

/// Parses `udp:127.0.0.1:5060` / `udp:[::1]:5060` listen specifications.
public enum ListenSpec {
    public static func parse(_ text: String) throws -> SIPEndpoint.ListenPoint {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ToolError("listen address must be transport:host:port, e.g. udp:127.0.0.1:5060") }
        let address = try SocketAddress(parts[1], defaultPort: 5060)
        switch parts[0].lowercased() {
        case "udp": return .udp(address)
        case "tcp": return .tcp(address)
        case "tls": return .tls(address)
        default: throw ToolError("transport \(parts[0]) is not supported (udp, tcp, tls)")
        }
    }
}

extension SIPEndpoint.ListenPoint {
    /// The transport the point listens on.
    public var transport: TransportKind {
        switch self {
        case .udp: return .udp
        case .tcp: return .tcp
        case .tls: return .tls
        }
    }

    /// The address the point listens on.
    public var address: SocketAddress {
        switch self {
        case .udp(let a), .tcp(let a), .tls(let a): return a
        }
    }
}

/// A plain error message for the command line.
public struct ToolError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// `switchboard serve`: a UAS answering every INVITE with one code, printing a line a second.
public final class ServeCommand: Sendable {
    public let endpoint: SIPEndpoint
    public let server: AnsweringServer

    public init(listen: [SIPEndpoint.ListenPoint], answer: Int, tls: TLSConfiguration = .init(), capture: (any SIPTrafficSink)? = nil,
                logger: Logger = .disabled) throws {
        let box = Mutex<AnsweringServer?>(nil)
        endpoint = try SIPEndpoint(configuration: .init(listen: listen, tls: tls, capture: capture, logger: logger)) { e in box.withLock { $0 }?.handle(e) }
        let local = endpoint.localAddresses[0].address
        let host = local.isIPv6 ? "[\(local.ipString)]" : local.ipString
        server = AnsweringServer(answerCode: answer, contact: "sip:switchboard@\(host):\(local.port)")
        server.attach(endpoint)
        box.withLock { $0 = server }
    }

    /// One statistics line: the rates since the previous snapshot.
    public struct Snapshot: Sendable {
        var server: AnsweringServer.Statistics
        var endpoint: EndpointStatistics
    }

    public func snapshot() -> Snapshot { Snapshot(server: server.statistics, endpoint: endpoint.statistics) }

    public func line(since previous: Snapshot, seconds: Double, elapsed: Int) -> String {
        let now = snapshot()
        let calls = Double(now.server.invites - previous.server.invites) / seconds
        let retrans = (now.endpoint.retransmissionsSent - previous.endpoint.retransmissionsSent) + (now.server.okRetransmissions - previous.server.okRetransmissions)
        let errors = (now.endpoint.sendErrors - previous.endpoint.sendErrors) + (now.endpoint.malformed - previous.endpoint.malformed)
            + (now.server.ackTimeouts - previous.server.ackTimeouts) + (now.endpoint.timeouts - previous.endpoint.timeouts)
        return "t=\(elapsed)s calls/s=\(Int(calls.rounded())) calls=\(now.server.invites) retransmissions=\(retrans) errors=\(errors) live-transactions=\(now.endpoint.liveTransactions)"
    }

    public func summary() -> String {
        let s = server.statistics, e = endpoint.statistics
        return "total: invites=\(s.invites) acks=\(s.acks) byes=\(s.byes) cancels=\(s.cancels) other=\(s.otherRequests) 2xx-retransmissions=\(s.okRetransmissions) ack-timeouts=\(s.ackTimeouts) requests=\(e.requestsReceived) sent=\(e.messagesSent) malformed=\(e.malformed) send-errors=\(e.sendErrors)"
    }
}

/// `switchboard dial`: place calls (INVITE, ACK, BYE) against a UAS and report the outcome.
public enum DialCommand {
    public static func run(target: String, count: Int, rate: Double, listen: SIPEndpoint.ListenPoint, timeout: Duration,
                           tls: TLSConfiguration = .init(), serverName: String? = nil, logger: Logger = .disabled,
                           dns: DNSClientConfiguration = .system(), capture: (any SIPTrafficSink)? = nil) async throws -> CallGenerator.Result {
        let uri = try SIPURI(target)
        return try await place(uri: uri, count: count, rate: rate, listen: listen, timeout: timeout, tls: tls, serverName: serverName, dns: dns,
                               capture: capture, logger: logger)
    }

    /// Where to send: RFC 3263 (numeric hosts as they are; names through /etc/hosts, NAPTR, SRV
    /// and A/AAAA), keeping the first target over the local transport.
    static func locate(_ uri: SIPURI, transport: TransportKind, dns: DNSClientConfiguration) async throws -> (SocketAddress, String?) {
        let wanted = ResolvedTarget.Transport(transport)
        let locator = SIPServerLocator(lookup: DNSClient(configuration: dns), configuration: .init(transports: [wanted]))
        let targets = try await locator.resolve(uri)
        guard let t = targets.first(where: { $0.transport == wanted }) else {
            throw ToolError("no \(wanted) target found for \(uri)")
        }
        return (try SocketAddress(ip: t.address, port: t.port), t.serverName)
    }

    static func place(uri: SIPURI, count: Int, rate: Double, listen: SIPEndpoint.ListenPoint, timeout: Duration,
                      tls: TLSConfiguration, serverName: String?, dns: DNSClientConfiguration,
                      capture: (any SIPTrafficSink)? = nil, logger: Logger = .disabled) async throws -> CallGenerator.Result {
        let endpoint = try SIPEndpoint(configuration: .init(listen: [listen], tls: tls, capture: capture, logger: logger)) { _ in }
        defer { endpoint.close() }
        let local = endpoint.localAddresses[0]
        let (address, name) = try await locate(uri, transport: local.transport, dns: dns)
        let peer = SIPPeer(transport: local.transport, address: address, serverName: serverName ?? name)
        let gen = CallGenerator(endpoint: endpoint, target: uri, peer: peer, local: local)
        let r = await gen.run(count: count, rate: rate, timeout: timeout)
        if r.finished < count {
            print("unfinished: \(count - r.finished); endpoint \(endpoint.statistics); tcp \(endpoint.tcpStatistics)")
        }
        return r
    }
}
