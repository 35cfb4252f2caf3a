import CSocket
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Synchronization
import SIPTransport

/// One IP address of the host, on an interface that is up.
public struct HostAddress: Sendable, Hashable, CustomStringConvertible {
    /// The interface's name (`eth0`, `wlan0`, `lo`).
    public var interface: String
    /// The address, numeric (`192.0.2.7`, `2001:db8::7`).
    public var address: String
    /// On a loopback interface.
    public var isLoopback: Bool
    /// An IPv6 link-local address (`fe80::/10`): not reachable beyond its link.
    public var isLinkLocal: Bool

    public init(interface: String, address: String, isLoopback: Bool = false, isLinkLocal: Bool = false) {
        self.interface = interface
        self.address = address
        self.isLoopback = isLoopback
        self.isLinkLocal = isLinkLocal
    }

    /// Whether it is an IPv6 address.
    public var isIPv6: Bool { address.contains(":") }

    public var description: String { "\(address) (\(interface))" }

    /// The host's addresses now (`getifaddrs(3)`, interfaces that are up).
    /// - Throws: ``TransportError/system(_:)`` when the system cannot list them.
    public static func current() throws(TransportError) -> [HostAddress] {
        var buffer = [CChar](repeating: 0, count: 64 * 1024)
        let n = buffer.withUnsafeMutableBufferPointer { cs_local_addresses($0.baseAddress, $0.count) }
        guard n >= 0 else { throw .system(.current("getifaddrs")) }
        let text = buffer.withUnsafeBufferPointer { b in
            String(decoding: UnsafeRawBufferPointer(start: b.baseAddress, count: b.firstIndex(of: 0) ?? b.count), as: UTF8.self)
        }
        return parse(text)
    }

    /// Reads the lines `cs_local_addresses` writes: `NAME ADDRESS FLAGS`; others are skipped.
    static func parse(_ text: String) -> [HostAddress] {
        text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 3 else { return nil }
            return HostAddress(interface: String(f[0]), address: String(f[1]), isLoopback: f[2] == "l", isLinkLocal: f[2] == "k")
        }
    }

    /// The default choice of where a phone goes when its address is gone: the first address of
    /// the same family that is neither loopback nor link-local, else nil (the phone stays where
    /// it is: with no other network there is nowhere to go, and its calls end when their
    /// re-INVITEs or the media time out). A phone listening on a loopback address moves to
    /// another loopback address first (tests and local set-ups).
    public static func replacement(for current: String, among addresses: [HostAddress]) -> String? {
        let v6 = current.contains(":")
        let sameFamily = addresses.filter { $0.isIPv6 == v6 && $0.address != current }
        let wasLoopback = current.hasPrefix("127.") || current == "::1"
        if wasLoopback, let l = sameFamily.first(where: \.isLoopback) { return l.address }
        return sameFamily.first { !$0.isLoopback && !$0.isLinkLocal }?.address
    }
}

/// Watches the host's addresses (Linux: a NETLINK_ROUTE socket subscribed to address changes)
/// and calls `changed` once things settle after a burst of changes (the kernel reports an
/// address going and its routes in several messages). One check at a time; a change that
/// comes during a check makes one more check after it.
final class NetworkWatcher: Sendable {
    private let fd: Int32
    /// Dispatch sources may be cancelled from any thread (Dispatch is thread-safe; the type is
    /// not marked Sendable).
    nonisolated(unsafe) private let source: DispatchSourceRead
    private let queue = DispatchQueue(label: "switchboard.network-watch")
    private struct State {
        var scheduled = false
        var running = false
        var again = false
        var closed = false
    }
    private let state = Mutex(State())
    private let settle: Duration
    private let changed: @Sendable () async -> Void

    init(settle: Duration = .milliseconds(150), changed: @escaping @Sendable () async -> Void) throws(TransportError) {
        let fd = cs_address_watch_open()
        guard fd >= 0 else { throw .system(.current("socket(AF_NETLINK)")) }
        self.fd = fd
        self.settle = settle
        self.changed = changed
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak self] in self?.readable() }
        source.setCancelHandler { _ = close(fd) }
        source.resume()
    }

    private func readable() {
        _ = cs_drain_datagrams(fd)
        let schedule = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            if s.running { s.again = true; return false }
            if s.scheduled { return false }
            s.scheduled = true
            return true
        }
        if schedule { run(after: settle) }
    }

    private func run(after delay: Duration) {
        Task { [self] in
            try? await Task.sleep(for: delay)
            let go = state.withLock { s -> Bool in
                s.scheduled = false
                guard !s.closed else { return false }
                s.running = true
                return true
            }
            guard go else { return }
            await changed()
            let more = state.withLock { s -> Bool in
                s.running = false
                guard s.again, !s.closed else { return false }
                s.again = false
                s.scheduled = true
                return true
            }
            if more { run(after: settle) }
        }
    }

    /// Stops watching (the socket closes).
    func stop() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        if first { source.cancel() }
    }
}
