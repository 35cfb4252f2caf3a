import CSocket
import Glibc
import NetworkIO
import SIPMessage
import Synchronization
import Logging

/// One connection's state, owned by ``TCPCore/State`` and touched only under its lock.
final class TCPConnection {
    enum Phase {
        /// A non-blocking connect is in progress; it fails at the deadline.
        case connecting(deadline: MonotonicClock.Instant)
        /// TLS: the TCP connection is up and the handshake runs; it fails at the deadline.
        case handshaking(deadline: MonotonicClock.Instant)
        case established
    }

    let fd: Int32
    var info: ConnectionInfo
    var phase: Phase
    /// Bytes waiting to be written (TLS records on a TLS connection), from `outHead` on.
    var out: [UInt8] = []
    var outHead = 0
    /// TLS: the session (used by the I/O thread only, once the connection is in the table).
    let tls: TLSSession?
    /// TLS: plaintext waiting for the I/O thread to encrypt it into `out`.
    var plaintextOut: [UInt8] = []
    /// TLS: the name an outbound connection was opened for (`send(_:to:serverName:)` reuses a
    /// connection only for the same name); `nil` for TCP and inbound connections.
    let serverName: String?
    /// TLS: what the handshake established.
    var tlsInfo: TLSSessionInfo?
    /// TLS: input is buffered in the session (a handshake run by `connect` read past its end),
    /// so the I/O thread must decrypt it without waiting for the socket.
    var inputPending = false
    var lastActivity: MonotonicClock.Instant
    /// Set by another thread (or a failed send); the I/O thread closes the connection.
    var closeRequest: ConnectionCloseReason?
    /// Whether ``TransportEvent/connectionOpened(_:)`` has been reported.
    var reportedOpen = false

    init(fd: Int32, info: ConnectionInfo, phase: Phase, now: MonotonicClock.Instant, tls: TLSSession? = nil, serverName: String? = nil) {
        self.fd = fd
        self.info = info
        self.phase = phase
        self.lastActivity = now
        self.tls = tls
        self.serverName = serverName
    }

    /// Bytes waiting to be written to the socket.
    var wireQueued: Int { out.count - outHead }
    /// Everything waiting: bytes for the socket and plaintext still to be encrypted.
    var queuedBytes: Int { out.count - outHead + plaintextOut.count }

    var isEstablished: Bool {
        if case .established = phase { return true }
        return false
    }

    /// Writes queued bytes until the socket would block; returns the bytes written, or the
    /// error that makes the connection unusable.
    func flush(now: MonotonicClock.Instant) -> Result<Int, SystemCallError> {
        var written = 0
        while outHead < out.count {
            let n = out.withUnsafeBufferPointer { cs_send_stream(fd, $0.baseAddress! + outHead, $0.count - outHead) }
            if n > 0 {
                outHead += n
                written += n
                continue
            }
            let e = cs_errno()
            if n < 0 && e == EINTR { continue }
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) { break }
            return .failure(SystemCallError(call: "send", code: n < 0 ? e : EPIPE))
        }
        if written > 0 { lastActivity = now }
        if outHead == out.count {
            out.removeAll(keepingCapacity: out.capacity <= 65_536)
            outHead = 0
        } else if outHead >= 65_536 && outHead * 2 >= out.count {
            out.removeFirst(outHead)
            outHead = 0
        }
        return .success(written)
    }
}

/// Which connection `send(_:to:)` may reuse: one to the same address, opened for the same TLS
/// server name (always `nil` over TCP, and for inbound connections).
struct RemoteKey: Hashable {
    var address: SocketAddress
    var serverName: String?
}

/// The state shared by a ``TCPTransport`` or a ``TLSTransport``, the threads that send and its
/// I/O thread.
///
/// TLS is a record layer over the same connections: with a ``TLSContext``, each connection
/// gets a ``TLSSession`` whose memory BIOs sit between the socket and the framer. Bytes read
/// are fed to the session and the plaintext it yields is framed; plaintext to send is queued
/// and encrypted by the I/O thread (the only thread touching an established session), and the
/// records join the connection's ordinary send queue. A TLS connection is reported open when
/// its handshake completes.
final class TCPCore: PolledLoopCore {
    struct State {
        var closed = false
        var connections: [ConnectionID: TCPConnection] = [:]
        /// The connection ``TCPTransport/send(_:to:)`` uses for each remote address.
        var byRemote: [RemoteKey: ConnectionID] = [:]
        var statistics = TCPTransportStatistics()
        /// TLS handshakes completed and failed.
        var handshakesCompleted = 0
        var handshakeFailures = 0
    }

    let listenFD: Int32
    let wakeFD: Int32
    let local: SocketAddress
    let configuration: TCPTransportConfiguration
    /// Present for a TLS transport.
    let tls: TLSContext?
    /// `.tcp`, or `.tls` when ``tls`` is set.
    let kind: TransportKind
    let handler: @Sendable (TransportEvent) -> Void
    let logger: Logger
    let state = Mutex(State())
    let loopThread = LoopThread()

    init(address: SocketAddress, configuration: TCPTransportConfiguration, tls: TLSContext? = nil, logger: Logger,
         handler: @escaping @Sendable (TransportEvent) -> Void) throws(TransportError) {
        self.logger = logger
        let fd = try Posix.boundSocket(kind: CS_KIND_TCP, address: address, nonblocking: true, reuseAddress: true)
        var wake: Int32 = -1
        do throws(TransportError) {
            guard cs_listen(fd, Int32(clamping: configuration.listenBacklog)) == 0 else { throw .system(.current("listen")) }
            local = try Posix.localAddress(of: fd)
            wake = try Posix.eventFD()
        } catch {
            Posix.close(fd)
            throw error
        }
        listenFD = fd
        wakeFD = wake
        self.configuration = configuration
        self.tls = tls
        self.kind = tls == nil ? .tcp : .tls
        self.handler = handler
    }

    func start() throws(TransportError) {
        try startLoop(named: "sip-\(kind == .tls ? "tls" : "tcp")-\(local.port)", release: {
            Posix.close(listenFD)
            Posix.close(wakeFD)
        }) { [self] in
            ioLoop()
        }
    }

    func markClosed() -> Bool {
        state.withLock { s in
            defer { s.closed = true }
            return !s.closed
        }
    }

    func requestClose(_ id: ConnectionID, reason: ConnectionCloseReason) {
        state.withLock { s in
            guard !s.closed, let c = s.connections[id], c.closeRequest == nil else { return }
            c.closeRequest = reason
            _ = cs_eventfd_signal(wakeFD)
        }
    }

    func connectionSnapshot() -> [ConnectionInfo] {
        state.withLock { s in s.connections.values.map(\.info) }.sorted { $0.id < $1.id }
    }

    /// The bytes queued on every connection, not yet written to its socket (plaintext still to
    /// be encrypted included).
    func queuedBytes() -> Int {
        state.withLock { s in s.connections.values.reduce(0) { $0 + $1.queuedBytes } }
    }

    /// The connection `send(_:to:serverName:)` would use.
    func connectionID(to remote: SocketAddress, serverName: String?) -> ConnectionID? {
        state.withLock { $0.byRemote[RemoteKey(address: remote, serverName: serverName)] }
    }

    /// What the TLS handshake of a connection established; `nil` before it completes.
    func tlsInfo(of id: ConnectionID) -> TLSSessionInfo? {
        state.withLock { $0.connections[id]?.tlsInfo }
    }

    // MARK: Sending

    func send(_ bytes: [UInt8], on id: ConnectionID, isMessage: Bool) throws(TransportError) {
        try state.withLock { s throws(TransportError) in
            guard !s.closed else { throw .transportClosed }
            guard let c = s.connections[id], c.closeRequest == nil else { throw .connectionClosed(id) }
            try enqueue(bytes, on: c, isMessage: isMessage, &s)
        }
    }

    func send(_ bytes: [UInt8], to remote: SocketAddress, serverName: String? = nil) throws(TransportError) -> ConnectionID {
        let key = RemoteKey(address: remote, serverName: serverName)
        return try state.withLock { s throws(TransportError) -> ConnectionID in
            guard !s.closed else { throw .transportClosed }
            if let id = s.byRemote[key], let c = s.connections[id] {
                if c.closeRequest == nil {
                    try enqueue(bytes, on: c, isMessage: true, &s)
                    return id
                }
                s.byRemote[key] = nil  // closing: the new connection takes the address over
            }
            guard s.connections.count < configuration.maxConnections else {
                s.statistics.sendErrors += 1
                throw .connectionLimitReached(limit: configuration.maxConnections)
            }
            let now = MonotonicClock.now
            let session = try tls?.makeClientSession(remote: remote, serverName: serverName)
            let (fd, localAddress) = try startConnect(to: remote)
            let info = ConnectionInfo(id: .next(), remote: remote, local: localAddress, direction: .outbound, transport: kind)
            let c = TCPConnection(fd: fd, info: info, phase: .connecting(deadline: now + configuration.connectTimeout), now: now, tls: session, serverName: serverName)
            insert(c, &s)
            try enqueue(bytes, on: c, isMessage: true, &s)
            _ = cs_eventfd_signal(wakeFD)
            return info.id
        }
    }

    /// Writes or queues bytes on a connection; under the lock.
    private func enqueue(_ bytes: [UInt8], on c: TCPConnection, isMessage: Bool, _ s: inout State) throws(TransportError) {
        guard c.queuedBytes + bytes.count <= configuration.maxQueuedBytesPerConnection else {
            s.statistics.sendErrors += 1
            throw .sendQueueFull(c.info.id, limit: configuration.maxQueuedBytesPerConnection)
        }
        if c.tls != nil {
            // Only the I/O thread touches an established TLS session: it encrypts the plaintext.
            let wasEmpty = c.plaintextOut.isEmpty
            c.plaintextOut.append(contentsOf: bytes)
            if isMessage { s.statistics.messagesSent += 1 }
            if wasEmpty && c.isEstablished { _ = cs_eventfd_signal(wakeFD) }
            return
        }
        let wasEmpty = c.queuedBytes == 0
        c.out.append(contentsOf: bytes)
        if isMessage { s.statistics.messagesSent += 1 }
        guard c.isEstablished, wasEmpty else {
            // Connecting, or earlier bytes still wait: the I/O thread writes them in order.
            return
        }
        switch c.flush(now: .now) {
        case .success(let n):
            s.statistics.bytesSent += n
            if c.queuedBytes > 0 { _ = cs_eventfd_signal(wakeFD) }  // poll for POLLOUT
        case .failure(let error):
            s.statistics.sendErrors += 1
            c.closeRequest = .failed(.system(error))
            _ = cs_eventfd_signal(wakeFD)
            throw .system(error)
        }
    }

    /// Creates a non-blocking socket and starts connecting it to `remote`.
    /// Starts a non-blocking connect to `remote`. The socket is bound first to our listening
    /// address's IP (any port) when we listen on one address rather than the wildcard, so that
    /// our connections leave from the address our Via and Contact name — and, after a network
    /// change, from the new address (a connection opened by the new listen point).
    private func startConnect(to remote: SocketAddress) throws(TransportError) -> (Int32, SocketAddress) {
        let fd = cs_socket(remote.family, CS_KIND_TCP, 1)
        guard fd >= 0 else { throw .system(.current("socket")) }
        _ = cs_set_nodelay(fd, 1)
        if !local.isWildcard, local.family == remote.family {
            var (source, sourceLength) = local.withPort(0).sockaddr
            if cs_bind(fd, &source, sourceLength) != 0 {
                let error = SystemCallError.current("bind")
                Posix.close(fd)
                throw .system(error)
            }
        }
        var (storage, length) = remote.sockaddr
        var rc: Int32
        repeat { rc = cs_connect(fd, &storage, length) } while rc != 0 && cs_errno() == EINTR
        if rc != 0 && cs_errno() != EINPROGRESS {
            let error = SystemCallError.current("connect")
            Posix.close(fd)
            throw .system(error)
        }
        do throws(TransportError) {
            return (fd, try Posix.localAddress(of: fd))
        } catch {
            Posix.close(fd)
            throw error
        }
    }

    func connect(to remote: SocketAddress, serverName: String? = nil) throws(TransportError) -> ConnectionInfo {
        try state.withLock { s throws(TransportError) in
            guard !s.closed else { throw .transportClosed }
            guard s.connections.count < configuration.maxConnections else { throw .connectionLimitReached(limit: configuration.maxConnections) }
        }
        let session = try tls?.makeClientSession(remote: remote, serverName: serverName)
        let (fd, localAddress) = try startConnect(to: remote)
        var handshaking = false
        do throws(TransportError) {
            // Wait for the connect on this thread; the I/O thread sees only established sockets.
            let deadline = MonotonicClock.now + configuration.connectTimeout
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            while true {
                let rc = poll(&pfd, 1, Posix.pollTimeout(until: deadline, now: .now))
                if rc > 0 { break }
                if rc == 0 { throw .connectTimeout(remote) }
                if cs_errno() != EINTR { throw .system(.current("poll")) }
            }
            let pending = cs_socket_error(fd)
            if pending < 0 { throw .system(.current("getsockopt(SO_ERROR)")) }
            if pending != 0 { throw .system(SystemCallError(call: "connect", code: pending)) }
            let localNow = (try? Posix.localAddress(of: fd)) ?? localAddress
            if let session, let tls {
                // The handshake runs on this thread too; the I/O thread gets an open connection.
                handshaking = true
                try session.handshake(on: fd, remote: remote, deadline: .now + tls.configuration.handshakeTimeout)
                handshaking = false
            }
            return try state.withLock { s throws(TransportError) -> ConnectionInfo in
                guard !s.closed else { throw .transportClosed }
                guard s.connections.count < configuration.maxConnections else { throw .connectionLimitReached(limit: configuration.maxConnections) }
                let info = ConnectionInfo(id: .next(), remote: remote, local: localNow, direction: .outbound, transport: kind)
                let c = TCPConnection(fd: fd, info: info, phase: .established, now: .now, tls: session, serverName: serverName)
                c.tlsInfo = session?.info
                c.inputPending = session?.hasBufferedInput ?? false
                insert(c, &s)
                s.statistics.connectionsEstablished += 1
                if session != nil { s.handshakesCompleted += 1 }
                _ = cs_eventfd_signal(wakeFD)  // the I/O thread reports it open and polls it
                return info
            }
        } catch {
            state.withLock { s in
                s.statistics.connectFailures += 1
                if handshaking { s.handshakeFailures += 1 }
            }
            Posix.close(fd)
            throw error
        }
    }

    private func insert(_ c: TCPConnection, _ s: inout State) {
        s.connections[c.info.id] = c
        let key = RemoteKey(address: c.info.remote, serverName: c.serverName)
        if s.byRemote[key] == nil { s.byRemote[key] = c.info.id }
        s.statistics.currentConnections = s.connections.count
        s.statistics.peakConnections = max(s.statistics.peakConnections, s.connections.count)
    }

    /// Removes and closes a connection; under the lock, on the I/O thread only (so that no
    /// descriptor is closed while the I/O thread may be reading it).
    private func remove(_ id: ConnectionID, reason: ConnectionCloseReason, _ s: inout State, _ events: inout [TransportEvent]) {
        guard let c = s.connections.removeValue(forKey: id) else { return }
        if let session = c.tls {
            // Best effort, never blocking: a close_notify on a clean close, or the alert a failed
            // handshake left, when no partly written record is in the way.
            switch reason {
            case .closedLocally, .transportClosed, .idleTimeout: session.shutdown()
            default: break
            }
            if c.wireQueued == 0, session.takeOutput(into: &c.out) > 0, case .success(let n) = c.flush(now: .now) {
                s.statistics.bytesSent += n
            }
            if case .failed(.tls) = reason, !c.isEstablished { s.handshakeFailures += 1 }
        }
        Posix.close(c.fd)
        let key = RemoteKey(address: c.info.remote, serverName: c.serverName)
        if s.byRemote[key] == id {
            // Hand the address over to another connection to the same peer, if any.
            s.byRemote[key] = s.connections.values.filter { $0.info.remote == c.info.remote && $0.serverName == c.serverName }.map(\.info.id).min()
        }
        s.statistics.currentConnections = s.connections.count
        s.statistics.connectionsClosed += 1
        switch reason {
        case .idleTimeout: s.statistics.idleTimeouts += 1
        case .failed(.framing): s.statistics.framingErrors += 1
        default: break
        }
        if !c.isEstablished && c.info.direction == .outbound { s.statistics.connectFailures += 1 }
        events.append(.connectionClosed(c.info, reason: reason))
    }

    // MARK: The I/O thread

    private enum PollTarget {
        case wake, listener
        case connection(ConnectionID, fd: Int32)
    }

    private func ioLoop() {
        let readSize = 65_536
        let readBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: readSize)
        // TLS: where records are decrypted to.
        let plaintextBuffer: UnsafeMutablePointer<UInt8>? = tls == nil ? nil : .allocate(capacity: readSize)
        defer {
            readBuffer.deallocate()
            plaintextBuffer?.deallocate()
            Posix.close(wakeFD)
        }
        var framers: [ConnectionID: SIPStreamFramer] = [:]
        var events: [TransportEvent] = []
        var fds: [pollfd] = []
        var targets: [PollTarget] = []
        // TLS connections whose session holds input to decrypt whether or not the socket is readable.
        var forcedReads: Set<ConnectionID> = []
        var acceptPausedUntil: MonotonicClock.Instant?

        func deliver() {
            for event in events {
                if case .connectionClosed(let info, _) = event { framers[info.id] = nil }
                handler(event)
            }
            events.removeAll(keepingCapacity: true)
        }

        while true {
            // 1. Under the lock: pending closes, timeouts, open reports, TLS encryption, and the poll set.
            var now = MonotonicClock.now
            fds.removeAll(keepingCapacity: true)
            targets.removeAll(keepingCapacity: true)
            forcedReads.removeAll(keepingCapacity: true)
            var deadline: MonotonicClock.Instant? = nil
            if let paused = acceptPausedUntil, paused <= now { acceptPausedUntil = nil }
            let closed = state.withLock { s -> Bool in
                if s.closed {
                    for id in s.connections.keys.sorted() { remove(id, reason: .transportClosed, &s, &events) }
                    Posix.close(listenFD)
                    return true
                }
                for (id, c) in s.connections {
                    if let reason = c.closeRequest {
                        remove(id, reason: reason, &s, &events)
                        continue
                    }
                    switch c.phase {
                    case .connecting(let limit):
                        if limit <= now { remove(id, reason: .failed(.connectTimeout(c.info.remote)), &s, &events); continue }
                        deadline = min(deadline ?? limit, limit)
                    case .handshaking(let limit):
                        if limit <= now { remove(id, reason: .failed(.tls("the TLS handshake did not complete in time")), &s, &events); continue }
                        deadline = min(deadline ?? limit, limit)
                    case .established:
                        if let idle = configuration.idleTimeout {
                            let limit = c.lastActivity + idle
                            if limit <= now { remove(id, reason: .idleTimeout, &s, &events); continue }
                            deadline = min(deadline ?? limit, limit)
                        }
                        if !c.reportedOpen {
                            c.reportedOpen = true
                            events.append(.connectionOpened(c.info))
                        }
                        if c.tls != nil {
                            if !encryptQueued(c, now: now, &s, &events) { continue }
                            if c.inputPending {
                                c.inputPending = false
                                forcedReads.insert(id)
                                deadline = now
                            }
                        }
                    }
                }
                fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
                targets.append(.wake)
                if acceptPausedUntil == nil {
                    fds.append(pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0))
                    targets.append(.listener)
                }
                for (id, c) in s.connections {
                    var wanted = Int16(POLLIN)
                    if case .connecting = c.phase { wanted = Int16(POLLOUT) } else if c.wireQueued > 0 { wanted |= Int16(POLLOUT) }
                    fds.append(pollfd(fd: c.fd, events: wanted, revents: 0))
                    targets.append(.connection(id, fd: c.fd))
                }
                return false
            }
            if let paused = acceptPausedUntil { deadline = min(deadline ?? paused, paused) }
            deliver()
            if closed { return }

            // 2. Wait.
            let rc = poll(&fds, nfds_t(fds.count), Posix.pollTimeout(until: deadline, now: .now))
            if rc < 0 {
                if cs_errno() != EINTR {
                    logger.warning("poll failed on the stream transport; retrying in 10 ms", metadata: ["sip.local": "\(local)", "errno": "\(cs_errno())"])
                    usleep(10_000)
                }
                continue
            }
            if rc == 0 && forcedReads.isEmpty { continue }
            now = MonotonicClock.now

            // 3. Handle what is ready.
            for (k, target) in targets.enumerated() {
                var revents = Int32(fds[k].revents)
                if case .connection(let id, _) = target, forcedReads.contains(id) { revents |= Int32(POLLIN) }
                guard revents != 0 else { continue }
                switch target {
                case .wake:
                    _ = cs_eventfd_drain(wakeFD)
                case .listener:
                    acceptPausedUntil = acceptConnections(now: now, &events)
                case .connection(let id, let fd):
                    handleConnection(id, fd: fd, revents: revents, now: now, buffer: readBuffer, size: readSize, plaintext: plaintextBuffer, framers: &framers, &events)
                }
            }
            deliver()
        }
    }

    /// Writes a connection's queued bytes until the socket would block; under the lock, on the
    /// I/O thread. Returns false when the write failed and the connection was removed.
    private func flushOrRemove(_ c: TCPConnection, now: MonotonicClock.Instant, _ s: inout State, _ events: inout [TransportEvent]) -> Bool {
        switch c.flush(now: now) {
        case .success(let n):
            s.statistics.bytesSent += n
            return true
        case .failure(let error):
            remove(c.info.id, reason: .failed(.system(error)), &s, &events)
            return false
        }
    }

    /// TLS: encrypts the plaintext queued on an established connection and writes what the
    /// socket takes; under the lock, on the I/O thread. Returns false when the connection failed
    /// and was removed.
    private func encryptQueued(_ c: TCPConnection, now: MonotonicClock.Instant, _ s: inout State, _ events: inout [TransportEvent]) -> Bool {
        guard let session = c.tls, !c.plaintextOut.isEmpty else { return true }
        if let failure = session.write(c.plaintextOut) {
            remove(c.info.id, reason: .failed(.tls(failure)), &s, &events)
            return false
        }
        c.plaintextOut.removeAll(keepingCapacity: c.plaintextOut.capacity <= 65_536)
        session.takeOutput(into: &c.out)
        return flushOrRemove(c, now: now, &s, &events)
    }

    /// Accepts pending connections; returns when to poll the listener again if accepting must
    /// pause (descriptor exhaustion), else `nil`.
    private func acceptConnections(now: MonotonicClock.Instant, _ events: inout [TransportEvent]) -> MonotonicClock.Instant? {
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(0)
            let fd = cs_accept(listenFD, &storage, &length)
            if fd < 0 {
                switch cs_errno() {
                case EAGAIN, EWOULDBLOCK: return nil
                case EINTR, ECONNABORTED, EPROTO: continue
                default:
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM: the listener stays readable, so stop
                    // polling it for a while instead of spinning.
                    logger.warning("accept failed; the listener pauses for 100 ms", metadata: ["sip.local": "\(local)", "errno": "\(cs_errno())"])
                    state.withLock { $0.statistics.acceptErrors += 1 }
                    return now + .milliseconds(100)
                }
            }
            let remote = SocketAddress(storage: storage, length: length)
            let localAddress = try? Posix.localAddress(of: fd)
            let accepted = state.withLock { s -> Bool in
                guard !s.closed, s.connections.count < configuration.maxConnections, let remote, let localAddress else {
                    s.statistics.connectionsRejected += 1
                    return false
                }
                _ = cs_set_nodelay(fd, 1)
                let info = ConnectionInfo(id: .next(), remote: remote, local: localAddress, direction: .inbound, transport: kind)
                if let tls {
                    // Opened when the handshake completes; refused when we have no certificate.
                    guard let session = try? tls.makeServerSession() else {
                        s.statistics.connectionsRejected += 1
                        return false
                    }
                    let c = TCPConnection(fd: fd, info: info, phase: .handshaking(deadline: now + tls.configuration.handshakeTimeout), now: now, tls: session)
                    insert(c, &s)
                    s.statistics.connectionsAccepted += 1
                    return true
                }
                let c = TCPConnection(fd: fd, info: info, phase: .established, now: now)
                c.reportedOpen = true
                insert(c, &s)
                s.statistics.connectionsAccepted += 1
                events.append(.connectionOpened(info))
                return true
            }
            if !accepted {
                Posix.close(fd)
                logger.debug("refused a connection (closing, over the limit of \(configuration.maxConnections), or no TLS certificate)",
                             metadata: ["sip.local": "\(local)", "sip.peer": "\(remote.map { "\($0)" } ?? "?")"])
            }
        }
        return nil
    }

    private func handleConnection(_ id: ConnectionID, fd: Int32, revents: Int32, now: MonotonicClock.Instant, buffer: UnsafeMutablePointer<UInt8>, size: Int, plaintext: UnsafeMutablePointer<UInt8>?, framers: inout [ConnectionID: SIPStreamFramer], _ events: inout [TransportEvent]) {
        // Connect completion and writes, under the lock.
        let (readable, session) = state.withLock { s -> (Bool, TLSSession?) in
            guard let c = s.connections[id], c.fd == fd, c.closeRequest == nil else { return (false, nil) }
            if case .connecting = c.phase {
                let pending = cs_socket_error(fd)
                if pending != 0 {
                    let error = pending > 0 ? SystemCallError(call: "connect", code: pending) : SystemCallError.current("getsockopt(SO_ERROR)")
                    remove(id, reason: .failed(.system(error)), &s, &events)
                    return (false, nil)
                }
                c.lastActivity = now
                c.info = ConnectionInfo(id: id, remote: c.info.remote, local: (try? Posix.localAddress(of: fd)) ?? c.info.local, direction: .outbound, transport: kind)
                if let session = c.tls, let tls {
                    // TCP is up: send the ClientHello; the connection opens when the handshake completes.
                    c.phase = .handshaking(deadline: now + tls.configuration.handshakeTimeout)
                    if case .failed(let reason) = session.handshake() {
                        remove(id, reason: .failed(.tls(reason)), &s, &events)
                        return (false, nil)
                    }
                    session.takeOutput(into: &c.out)
                } else {
                    c.phase = .established
                    c.reportedOpen = true
                    s.statistics.connectionsEstablished += 1
                    events.append(.connectionOpened(c.info))
                }
            }
            if c.wireQueued > 0 && revents & (Int32(POLLOUT) | Int32(POLLERR) | Int32(POLLHUP)) != 0 {
                guard flushOrRemove(c, now: now, &s, &events) else { return (false, nil) }
            }
            return (revents & (Int32(POLLIN) | Int32(POLLERR) | Int32(POLLHUP)) != 0, c.tls)
        }
        guard readable else { return }

        // Read outside the lock: only this thread closes descriptors, so `fd` stays valid, and
        // only this thread uses an established TLS session.
        var n: Int
        repeat { n = cs_recv_stream(fd, buffer, size) } while n < 0 && cs_errno() == EINTR
        var received = 0
        var endOfStream = false
        if n > 0 {
            received = n
        } else if n == 0 {
            endOfStream = true
        } else {
            let e = cs_errno()
            if e != EAGAIN && e != EWOULDBLOCK {
                let error = SystemCallError(call: "recv", code: e)
                state.withLock { remove(id, reason: .failed(.system(error)), &$0, &events) }
                return
            }
            // Nothing on the socket; a TLS session may still hold input (a forced read).
            if session == nil { return }
        }
        if endOfStream && session == nil {
            state.withLock { remove(id, reason: .remoteClosed, &$0, &events) }
            return
        }

        var framer = framers.removeValue(forKey: id) ?? SIPStreamFramer(limits: configuration.limits, mode: .strict)
        var tlsFailure: String?
        var tlsClosed = false
        if let session, let plaintext {
            session.feed(UnsafeRawBufferPointer(start: buffer, count: received))
            if !session.isHandshakeComplete {
                switch session.handshake() {
                case .pending:
                    break
                case .failed(let reason):
                    tlsFailure = reason
                case .complete:
                    // Reported open before anything read on it.
                    state.withLock { s in
                        s.handshakesCompleted += 1
                        guard let c = s.connections[id] else { return }
                        c.phase = .established
                        c.tlsInfo = session.info
                        c.lastActivity = now
                        c.reportedOpen = true
                        if c.info.direction == .outbound { s.statistics.connectionsEstablished += 1 }
                        events.append(.connectionOpened(c.info))
                    }
                }
            }
            if tlsFailure == nil && session.isHandshakeComplete {
                reading: while true {
                    switch session.read(into: plaintext, capacity: size) {
                    case .data(let k): framer.append(UnsafeBufferPointer(start: plaintext, count: k))
                    case .wantMore: break reading
                    case .closed: tlsClosed = true; break reading
                    case .failed(let reason): tlsFailure = reason; break reading
                    }
                }
            }
        } else {
            framer.append(UnsafeBufferPointer(start: buffer, count: received))
        }

        var messages = 0, pings = 0, pongs = 0
        var failure: SIPParseError?
        var info: ConnectionInfo?
        while true {
            let next: SIPStreamEvent?
            do throws(SIPParseError) {
                next = try framer.next()
            } catch {
                failure = error
                break
            }
            guard let next else { break }
            switch next {
            case .message(let message):
                if info == nil { info = state.withLock { $0.connections[id]?.info } }
                guard let info else { break }
                messages += 1
                events.append(.message(InboundMessage(message: message, source: info.remote, local: info.local, transport: kind, connection: id, receivedAt: now)))
            case .keepAlivePing:
                pings += 1
                events.append(.keepAlivePing(id))
            case .keepAlivePong:
                pongs += 1
                events.append(.keepAlivePong(id))
            case .discarded:
                break  // strict mode never discards
            }
        }
        framers[id] = framer
        state.withLock { s in
            s.statistics.bytesReceived += received
            s.statistics.messagesReceived += messages
            s.statistics.keepAlivePongsReceived += pongs
            guard let c = s.connections[id] else { return }
            c.lastActivity = now
            if let session, session.takeOutput(into: &c.out) > 0 {
                // Handshake messages, alerts, post-handshake messages: in order after what was queued.
                guard flushOrRemove(c, now: now, &s, &events) else { return }
            }
            if let failure {
                remove(id, reason: .failed(.framing(failure)), &s, &events)
                return
            }
            if let tlsFailure {
                remove(id, reason: .failed(.tls(tlsFailure)), &s, &events)
                return
            }
            if tlsClosed || endOfStream {
                let complete = session?.isHandshakeComplete ?? true
                remove(id, reason: complete ? .remoteClosed : .failed(.tls("the peer closed the connection during the TLS handshake")), &s, &events)
                return
            }
            for _ in 0..<pings {
                // RFC 5626 §4.4.1: answer each CRLFCRLF with CRLF.
                do throws(TransportError) {
                    try enqueue([0x0D, 0x0A], on: c, isMessage: false, &s)
                    s.statistics.keepAlivePingsAnswered += 1
                } catch {
                    break
                }
            }
        }
    }
}
