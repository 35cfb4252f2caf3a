import CSocket
import Glibc
import NetworkIO
import SIPMessage
import Synchronization
import Logging

/// Settings of a ``UDPTransport``.
public struct UDPTransportConfiguration: Sendable, Hashable {
    /// The receive buffer to ask the kernel for (SO_RCVBUF), in bytes. The kernel caps it at
    /// `net.core.rmem_max` unless the process has CAP_NET_ADMIN; see
    /// ``UDPTransport/receiveBufferSize`` for what was granted.
    public var receiveBufferSize: Int
    /// The send buffer to ask the kernel for (SO_SNDBUF), in bytes (capped at `net.core.wmem_max`).
    public var sendBufferSize: Int
    /// How many datagrams one `recvmmsg` call may return (1–256). Each takes a 64 KiB slot of a
    /// buffer allocated once.
    public var batchSize: Int
    /// The limits every received message is parsed under.
    public var limits: SIPParserLimits
    /// Whether to set SO_REUSEADDR before binding. Off by default: on Linux it lets several UDP
    /// sockets bind the same port and share its traffic unpredictably.
    public var reuseAddress: Bool
    /// Whether ICMP errors for datagrams we send (port or host unreachable) are asked of the
    /// kernel (IP_RECVERR) and reported as ``TransportEvent/unreachable(destination:transport:error:)``,
    /// so a request to a closed port fails at once instead of at its timeout. On by default.
    public var reportsUnreachable = true

    /// Creates a configuration; the defaults ask for 4 MiB buffers and 32-datagram batches.
    public init(receiveBufferSize: Int = 4 << 20, sendBufferSize: Int = 4 << 20, batchSize: Int = 32, limits: SIPParserLimits = .default, reuseAddress: Bool = false) {
        self.receiveBufferSize = receiveBufferSize
        self.sendBufferSize = sendBufferSize
        self.batchSize = batchSize
        self.limits = limits
        self.reuseAddress = reuseAddress
    }
}

/// Counters of a ``UDPTransport`` since it was created.
public struct UDPTransportStatistics: Sendable, Hashable {
    /// Datagrams read from the socket (messages, malformed datagrams and keep-alives).
    public var datagramsReceived = 0
    /// Datagrams that parsed as SIP messages and were delivered.
    public var messagesReceived = 0
    /// Datagrams that failed to parse (delivered as ``TransportEvent/malformed(bytes:source:error:)``).
    public var malformed = 0
    /// Datagrams holding only CR and LF bytes (NAT keep-alives), or nothing; not delivered.
    public var keepAlives = 0
    /// Datagrams cut short because they did not fit a receive slot (counted as malformed too).
    public var truncated = 0
    /// Bytes of all datagrams received.
    public var bytesReceived = 0
    /// Failed `recvmmsg` calls (other than "try again" and ICMP errors).
    public var receiveErrors = 0
    /// `recvmmsg` calls that returned datagrams.
    public var receiveBatches = 0
    /// Datagrams handed to the kernel.
    public var datagramsSent = 0
    /// Datagrams the kernel refused (the send threw).
    public var sendErrors = 0
    /// Bytes of all datagrams sent.
    public var bytesSent = 0
    /// ICMP errors read for datagrams we sent (destination unreachable).
    public var unreachable = 0
    /// Datagrams dropped on our own host (the kernel's queue full, `ENOBUFS`/`EAGAIN`, or a
    /// local firewall drop reported through `IP_RECVERR`): lost like any datagram on the way,
    /// so the send does not fail; the transaction's retransmissions stand in for it.
    public var droppedLocally = 0

    /// Creates zeroed counters.
    public init() {}
}

/// A SIP transport over one UDP socket (RFC 3261 §18.1.1, §18.2.1).
///
/// Creating it binds the socket and starts a receive thread that reads datagrams in batches
/// (`recvmmsg`), parses each into a ``SIPMessage`` and reports it to the handler. Sending is
/// done from any thread with ``send(_:to:)``; it never waits for the receive thread.
///
/// ```swift
/// let udp = try UDPTransport(bindingTo: SocketAddress("0.0.0.0:5060")) { event in
///     if case .message(let inbound) = event { runtime.receive(inbound) }
/// }
/// try udp.send(response.serialized(), to: inbound.source)
/// udp.close()
/// ```
///
/// Datagrams holding only CR/LF (NAT keep-alives) are counted and dropped. The handler runs on
/// the receive thread; ``close()`` may be called from it.
public final class UDPTransport: Sendable {
    /// The largest UDP payload over IPv4: 65,535 − 20 (IP header) − 8 (UDP header).
    public static let maxIPv4DatagramSize = 65_507
    /// The largest UDP payload over IPv6 without jumbograms: 65,535 − 8 (UDP header).
    public static let maxIPv6DatagramSize = 65_527

    private let core: UDPCore

    /// The address the socket is bound to (with the kernel's port when port 0 was asked for).
    public var localAddress: SocketAddress { core.local }
    /// The receive buffer size the kernel reports after the request (Linux reports twice the
    /// usable payload size, counting its bookkeeping).
    public var receiveBufferSize: Int { core.receiveBufferSize }
    /// The send buffer size the kernel reports after the request.
    public var sendBufferSize: Int { core.sendBufferSize }
    /// The largest datagram ``send(_:to:)`` accepts over this socket's address family.
    public var maxDatagramSize: Int { core.maxDatagramSize }
    /// The transport kind, always ``TransportKind/udp``.
    public var kind: TransportKind { .udp }
    /// A snapshot of the counters.
    public var statistics: UDPTransportStatistics { core.statistics.withLock { $0 } }

    /// Whether a `sendto` error means our own host dropped the datagram (a full queue or an
    /// output filter) rather than that the transport cannot send: `ENOBUFS`, `EAGAIN`/`EWOULDBLOCK`
    /// and `EPERM` (netfilter's verdict on an output rule).
    public static func isLocalDrop(_ code: Int32) -> Bool {
        code == ENOBUFS || code == EAGAIN || code == EWOULDBLOCK || code == EPERM
    }
    /// Whether ``close()`` has been called.
    public var isClosed: Bool { core.state.withLock { $0.closed } }

    /// Binds a UDP socket to `address` (port 0 for an ephemeral port; IPv6 sockets are
    /// IPv6-only) and starts receiving; every event goes to `handler`, on the receive thread.
    /// Socket errors the transport recovers from by itself are logged to `logger` (`warning`).
    /// - Throws: ``TransportError/system(_:)`` when a socket call fails (`bind` with
    ///   `EADDRINUSE`, …).
    public init(bindingTo address: SocketAddress, configuration: UDPTransportConfiguration = .init(), logger: Logger = .disabled,
                handler: @escaping @Sendable (TransportEvent) -> Void) throws(TransportError) {
        core = try UDPCore(address: address, configuration: configuration, logger: logger, handler: handler)
        try core.start()
    }

    deinit {
        core.close()
    }

    /// Sends one datagram to `destination` (`sendto`).
    /// - Throws: ``TransportError/messageTooLarge(size:limit:)`` above ``maxDatagramSize``,
    ///   ``TransportError/addressFamilyMismatch(local:remote:)``,
    ///   ``TransportError/transportClosed`` after ``close()``, ``TransportError/system(_:)`` when
    ///   the kernel refuses it.
    public func send(_ bytes: [UInt8], to destination: SocketAddress) throws(TransportError) {
        try core.send(bytes, to: destination)
    }

    /// Sends several datagrams with as few system calls as possible (`sendmmsg`).
    ///
    /// Every datagram is checked (size, address family) before any is sent.
    /// - Throws: the checks' errors, with nothing sent; ``TransportError/batchInterrupted(sent:error:)``
    ///   when the kernel refused a datagram part-way (the ones before it were sent).
    public func send(_ batch: [([UInt8], SocketAddress)]) throws(TransportError) {
        try core.send(batch: batch)
    }

    /// Stops the receive thread, waits for it to end and closes the socket. Idempotent. When
    /// called from the handler (on the receive thread), the socket closes as soon as the handler
    /// returns.
    public func close() {
        core.close()
    }
}

/// The state shared by a ``UDPTransport`` and its receive thread (the thread keeps the core
/// alive, not the transport, so that dropping the transport closes it).
final class UDPCore: TransportLoopCore {
    struct State {
        var closed = false
        /// Sends in progress; the socket is closed only once they are done.
        var sendsInFlight = 0
    }

    let fd: Int32
    let local: SocketAddress
    let receiveBufferSize: Int
    let sendBufferSize: Int
    let maxDatagramSize: Int
    let configuration: UDPTransportConfiguration
    let handler: @Sendable (TransportEvent) -> Void
    let logger: Logger
    let state = Mutex(State())
    let statistics = Mutex(UDPTransportStatistics())
    /// Held while the error queue is read, and by a send retried after other datagrams' ICMP
    /// errors (see ``send(_:to:)``).
    let errorQueue = Mutex(())
    let loopThread = LoopThread()

    init(address: SocketAddress, configuration: UDPTransportConfiguration, logger: Logger, handler: @escaping @Sendable (TransportEvent) -> Void) throws(TransportError) {
        let fd = try Posix.boundSocket(kind: CS_KIND_UDP, address: address, nonblocking: false, reuseAddress: configuration.reuseAddress)
        do throws(TransportError) {
            let rcv = cs_set_buffer_size(fd, 0, Int32(clamping: configuration.receiveBufferSize))
            guard rcv >= 0 else { throw .system(.current("setsockopt(SO_RCVBUF)")) }
            let snd = cs_set_buffer_size(fd, 1, Int32(clamping: configuration.sendBufferSize))
            guard snd >= 0 else { throw .system(.current("setsockopt(SO_SNDBUF)")) }
            receiveBufferSize = Int(rcv)
            sendBufferSize = Int(snd)
            local = try Posix.localAddress(of: fd)
            // ICMP errors for what we send are queued and read by the receive thread (its
            // blocked receive returns with the error, so no system call is spent while none come).
            if configuration.reportsUnreachable && cs_enable_recverr(fd, local.isIPv6 ? AF_INET6 : AF_INET) != 0 {
                logger.debug("IP_RECVERR not available: unreachable destinations are learnt by timeout only",
                             metadata: ["sip.local": "udp:\(local)"])
            }
        } catch {
            Posix.close(fd)
            throw error
        }
        self.fd = fd
        self.maxDatagramSize = address.isIPv6 ? UDPTransport.maxIPv6DatagramSize : UDPTransport.maxIPv4DatagramSize
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
    }

    func start() throws(TransportError) {
        try startLoop(named: "sip-udp-\(local.port)", release: releaseDescriptors) { [self] in
            receiveLoop()
            releaseDescriptors()
        }
    }

    /// The errors a receive reports for an ICMP message about a datagram sent earlier (its
    /// entry in the error queue may have been read already by a send).
    static let icmpErrors: Set<Int32> = [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN, EMSGSIZE, EPROTO]

    /// Marks the core closed, wakes the receive thread out of recvmmsg(2) (a shutdown of the
    /// socket's receiving side) and waits for it to end. Idempotent; from the receive thread
    /// itself it does not wait. The descriptor is held open meanwhile (counted as a send in
    /// flight), so the thread cannot close it between the flag and the shutdown.
    func close() {
        let first = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.closed = true
            s.sendsInFlight += 1
            return true
        }
        if first {
            cs_shutdown_receive(fd)
            state.withLock { $0.sendsInFlight -= 1 }
        }
        loopThread.join()
    }

    func markClosed() -> Bool {
        state.withLock { s in
            defer { s.closed = true }
            return !s.closed
        }
    }

    /// Closes the descriptors once no send is using the socket; runs on the receive thread as
    /// it ends (or in `start` when the thread could not be created).
    private func releaseDescriptors() {
        while state.withLock({ $0.sendsInFlight }) > 0 { sched_yield() }
        Posix.close(fd)
    }

    // MARK: Sending

    private func check(_ size: Int, _ destination: SocketAddress) throws(TransportError) {
        guard size <= maxDatagramSize else { throw .messageTooLarge(size: size, limit: maxDatagramSize) }
        guard destination.isIPv6 == local.isIPv6 else { throw .addressFamilyMismatch(local: local, remote: destination) }
    }

    private func beginSend() throws(TransportError) {
        try state.withLock { s throws(TransportError) in
            guard !s.closed else { throw .transportClosed }
            s.sendsInFlight += 1
        }
    }

    private func endSend() {
        state.withLock { $0.sendsInFlight -= 1 }
    }

    /// How many times a send failed by other datagrams' ICMP errors is tried again.
    static let refusalRetries = 64


    func send(_ bytes: [UInt8], to destination: SocketAddress) throws(TransportError) {
        try check(bytes.count, destination)
        try beginSend()
        defer { endSend() }
        var (storage, length) = destination.sockaddr
        func attempt() -> (Int, Int32) {
            let n = bytes.withUnsafeBufferPointer { cs_sendto(fd, $0.baseAddress, $0.count, 0, &storage, length) }
            return (n, n < 0 ? cs_errno() : 0)
        }
        var (sent, code) = attempt()
        if sent < 0 && code == ECONNREFUSED {
            // An ICMP error for an earlier datagram (IP_RECVERR) is left pending on the socket
            // and fails the next send: not this datagram's error (an unconnected socket learns
            // of its own only later), so send again. Reading the error queue while more errors
            // are queued arms the pending error again (Linux), so the retries hold the receive
            // thread's error reading off; only ICMP errors still arriving can fail them.
            (sent, code) = errorQueue.withLock { _ in
                var r = attempt(), tries = 0
                while r.0 < 0 && (r.1 == ECONNREFUSED || r.1 == EINTR) && tries < Self.refusalRetries {
                    tries += 1
                    r = attempt()
                }
                return r
            }
        }
        while sent < 0 && code == EINTR { (sent, code) = attempt() }
        if sent < 0 && UDPTransport.isLocalDrop(code) {
            // UDP is unreliable (RFC 3261 §18.1.1): a datagram our own host dropped is a lost
            // datagram, not a failed transport. Failing the send would end the transaction
            // (§17.1.4, §17.2.4) — and a call — for what a retransmission repairs.
            statistics.withLock { $0.droppedLocally += 1 }
            return
        }
        guard sent >= 0 else {
            let error = SystemCallError(call: "sendto", code: code)
            statistics.withLock { $0.sendErrors += 1 }
            throw .system(error)
        }
        statistics.withLock {
            $0.datagramsSent += 1
            $0.bytesSent += bytes.count
        }
    }

    func send(batch: [([UInt8], SocketAddress)]) throws(TransportError) {
        guard !batch.isEmpty else { return }
        var total = 0
        for (bytes, destination) in batch {
            try check(bytes.count, destination)
            total += bytes.count
        }
        // One contiguous copy so that every datagram has a stable pointer during the call.
        var joined = [UInt8]()
        joined.reserveCapacity(total)
        var lengths = [Int]()
        lengths.reserveCapacity(batch.count)
        var addresses = [sockaddr_storage]()
        addresses.reserveCapacity(batch.count)
        var addressLengths = [socklen_t]()
        addressLengths.reserveCapacity(batch.count)
        for (bytes, destination) in batch {
            joined.append(contentsOf: bytes)
            lengths.append(bytes.count)
            let (storage, length) = destination.sockaddr
            addresses.append(storage)
            addressLengths.append(length)
        }
        try beginSend()
        defer { endSend() }
        let sent: Int32 = joined.withUnsafeBufferPointer { data in
            var pointers = [UnsafePointer<UInt8>?]()
            pointers.reserveCapacity(lengths.count)
            var offset = 0
            for n in lengths {
                pointers.append(data.baseAddress.map { $0 + offset })
                offset += n
            }
            return pointers.withUnsafeBufferPointer { p in
                cs_send_batch(fd, p.baseAddress, lengths, Int32(lengths.count), addresses, addressLengths, 0)
            }
        }
        let delivered = max(0, Int(sent))
        if delivered < batch.count {
            let error = SystemCallError.current("sendmmsg")
            statistics.withLock {
                $0.datagramsSent += delivered
                $0.bytesSent += lengths[..<delivered].reduce(0, +)
                $0.sendErrors += 1
            }
            throw .batchInterrupted(sent: delivered, error: error)
        }
        statistics.withLock {
            $0.datagramsSent += delivered
            $0.bytesSent += total
        }
    }

    // MARK: Receiving

    /// A receive slot is larger than any UDP payload, so no datagram is ever truncated.
    private static let slotSize = 65_536

    private func receiveLoop() {
        let count = min(max(configuration.batchSize, 1), 256)
        let slot = Self.slotSize
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: count * slot)
        let addresses = UnsafeMutablePointer<sockaddr_storage>.allocate(capacity: count)
        let addressLengths = UnsafeMutablePointer<socklen_t>.allocate(capacity: count)
        let lengths = UnsafeMutablePointer<Int>.allocate(capacity: count)
        let flags = UnsafeMutablePointer<Int32>.allocate(capacity: count)
        defer {
            buffer.deallocate()
            addresses.deallocate()
            addressLengths.deallocate()
            lengths.deallocate()
            flags.deallocate()
        }
        var events = [TransportEvent]()
        events.reserveCapacity(count)

        while !state.withLock({ $0.closed }) {
            // One system call per wake-up: recvmmsg(2) blocks until a datagram comes, then takes
            // what else is queued (MSG_WAITFORONE). A poll(2) first, then a non-blocking
            // recvmmsg, cost two (poll alone ~0.7 µs here; under load a wake-up drains about
            // ten datagrams, so that is ~0.2 µs a call). An ICMP error for what we sent
            // (IP_RECVERR) ends the wait with its errno, and then the error queue is read;
            // close() ends it with a shutdown (0).
            let n = Int(cs_recv_batch(fd, buffer, slot, Int32(count), addresses, addressLengths, lengths, flags, Int32(MSG_WAITFORONE)))
            if n <= 0 {
                if n < 0 {
                    let e = cs_errno()
                    if e == EINTR || e == EAGAIN || e == EWOULDBLOCK { continue }
                    if !drainErrors() && !UDPCore.icmpErrors.contains(e) {
                        logger.warning("receiving on the UDP socket failed; retrying in 10 ms", metadata: ["sip.local": "udp:\(local)", "errno": "\(e)"])
                        statistics.withLock { $0.receiveErrors += 1 }
                        usleep(10_000)
                    }
                } else if !state.withLock({ $0.closed }) {
                    // Shut down by someone else than close(): nothing more will come.
                    usleep(10_000)
                }
                continue
            }
            let now = MonotonicClock.now
            var delta = UDPTransportStatistics()
            delta.receiveBatches = 1
            for i in 0..<n {
                let length = lengths[i]
                delta.datagramsReceived += 1
                delta.bytesReceived += length
                guard let source = SocketAddress(storage: addresses[i], length: addressLengths[i]) else { continue }
                let raw = UnsafeRawBufferPointer(start: buffer + i * slot, count: length)
                if flags[i] & Int32(MSG_TRUNC) != 0 {
                    delta.truncated += 1
                    delta.malformed += 1
                    let error = SIPParseError(offset: length, rule: .messageTooLarge, detail: "datagram truncated to \(length) bytes")
                    events.append(.malformed(bytes: Array(raw), source: source, error: error))
                    continue
                }
                if Posix.isOnlyLineBreaks(raw) {
                    delta.keepAlives += 1
                    continue
                }
                let bytes = Array(raw)
                do throws(SIPParseError) {
                    let message = try SIPMessage(bytes: bytes, limits: configuration.limits)
                    delta.messagesReceived += 1
                    events.append(.message(InboundMessage(message: message, source: source, local: local, transport: .udp, connection: nil, receivedAt: now)))
                } catch {
                    delta.malformed += 1
                    events.append(.malformed(bytes: bytes, source: source, error: error))
                }
            }
            statistics.withLock { $0.add(delta) }
            for event in events { handler(event) }
            events.removeAll(keepingCapacity: true)
        }
    }
}

extension UDPCore {
    /// Reads the queued ICMP errors (bounded per wake-up) and reports each as
    /// ``TransportEvent/unreachable(destination:transport:error:)``; whether there was any.
    func drainErrors() -> Bool {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        var error: Int32 = 0
        var any = false
        for _ in 0..<64 {
            let rc = errorQueue.withLock { _ in cs_recv_error(fd, &storage, &length, &error) }
            if rc < 0 {
                // Unreadable (it should not happen): pause, so an error that stays does not spin.
                statistics.withLock { $0.receiveErrors += 1 }
                usleep(10_000)
                return true
            }
            guard rc == 1 else { return any }
            any = true
            statistics.withLock { $0.unreachable += 1 }
            guard let destination = SocketAddress(storage: storage, length: length) else { continue }
            handler(.unreachable(destination: destination, transport: .udp, error: error))
        }
        return any
    }
}

extension UDPTransportStatistics {
    /// Sums a receive batch's counts into the totals: the fields written out, since key paths
    /// (`swift_getAtKeyPath` twice per counter) cost more than the rest of a small batch.
    mutating func add(_ d: UDPTransportStatistics) {
        datagramsReceived &+= d.datagramsReceived
        messagesReceived &+= d.messagesReceived
        malformed &+= d.malformed
        keepAlives &+= d.keepAlives
        truncated &+= d.truncated
        bytesReceived &+= d.bytesReceived
        receiveErrors &+= d.receiveErrors
        receiveBatches &+= d.receiveBatches
        datagramsSent &+= d.datagramsSent
        sendErrors &+= d.sendErrors
        bytesSent &+= d.bytesSent
        unreachable &+= d.unreachable
        droppedLocally &+= d.droppedLocally
    }
}
