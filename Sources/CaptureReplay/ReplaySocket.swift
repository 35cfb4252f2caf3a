import SIPMessage
import SIPTransport
import NetworkIO
import Logging
import Synchronization

/// The replay's SIP socket: a UDP socket, or a TCP or TLS listener whose connections carry the
/// messages (RFC 3261 §18.3: framed by Content-Length; one connection to the device, reused for
/// every request, and responses on the connection their request came on).
enum ReplaySocket {
    case udp(UDPTransport)
    case tcp(TCPTransport)
    case tls(TLSTransport)

    /// Opens the socket at `address` (a listener for TCP and TLS); what arrives goes to `inbox`.
    init(_ kind: TransportKind, at address: SocketAddress, tls: TLSConfiguration, logger: Logger, inbox: Inbox) throws(TransportError) {
        let handler: @Sendable (TransportEvent) -> Void = { event in
            switch event {
            case .message(let m): inbox.queue.withLock { $0.append(m) }
            case .connectionClosed(let info, _): inbox.closed.withLock { $0.append(info.id) }
            default: break
            }
        }
        switch kind {
        case .udp:
            self = .udp(try UDPTransport(bindingTo: address, configuration: UDPTransportConfiguration(receiveBufferSize: 1 << 20, sendBufferSize: 1 << 20),
                                         logger: logger, handler: handler))
        case .tcp:
            self = .tcp(try TCPTransport(listeningOn: address, configuration: tls.connections, logger: logger, handler: handler))
        case .tls:
            self = .tls(try TLSTransport(listeningOn: address, configuration: tls, logger: logger, handler: handler))
        }
    }

    var kind: TransportKind {
        switch self {
        case .udp: return .udp
        case .tcp: return .tcp
        case .tls: return .tls
        }
    }

    var localAddress: SocketAddress {
        switch self {
        case .udp(let t): return t.localAddress
        case .tcp(let t): return t.localAddress
        case .tls(let t): return t.localAddress
        }
    }

    /// Whether a TLS listener has a certificate to accept connections with (always true otherwise).
    var acceptsConnections: Bool {
        if case .tls(let t) = self { return t.acceptsConnections }
        return true
    }

    /// Sends one message: on `connection` when given and still open, otherwise to `destination`
    /// (over a connection already open to it, or a new one). Returns the connection used.
    @discardableResult
    func send(_ bytes: [UInt8], to destination: SocketAddress, on connection: ConnectionID?) throws(TransportError) -> ConnectionID? {
        switch self {
        case .udp(let t):
            try t.send(bytes, to: destination)
            return nil
        case .tcp(let t):
            if let connection, (try? t.send(bytes, on: connection)) != nil { return connection }
            return try t.send(bytes, to: destination)
        case .tls(let t):
            if let connection, (try? t.send(bytes, on: connection)) != nil { return connection }
            return try t.send(bytes, to: destination)
        }
    }

    func close() {
        switch self {
        case .udp(let t): t.close()
        case .tcp(let t): t.close()
        case .tls(let t): t.close()
        }
    }
}
