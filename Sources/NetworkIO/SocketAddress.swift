import CSocket
import Glibc

/// An IPv4 or IPv6 address and a UDP/TCP port: where a socket is bound, where a datagram
/// came from or goes to (SIP, media, DNS). Numeric only; resolving host names (RFC 3263)
/// belongs to the layers above.
///
/// The text form is `192.0.2.1:5060` for IPv4 and `[2001:db8::1]:5060` for IPv6 (RFC 5118),
/// with a non-zero IPv6 scope written `[fe80::1%2]:5060`. Text is parsed with `inet_pton` and
/// written with `inet_ntop`.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    // Three words (addresses ride in every event and peer of the SIP runtime, and a struct of
    // more than six scalars is copied through its value witnesses in other modules): the
    // address in `high` and `low` (IPv4 in `low`), the port, the scope and the family in `meta`.
    /// The first 64 bits of an IPv6 address; 0 for IPv4.
    package let high: UInt64
    /// The last 64 bits of an IPv6 address, or the IPv4 address.
    package let low: UInt64
    /// The port (bits 0-15), the scope (bits 16-47) and whether the address is IPv6 (bit 63);
    /// the other bits are 0.
    package let meta: UInt64

    package static let ipv6Bit: UInt64 = 1 << 63
    /// The bits of ``meta`` that an address uses (the rest are free for a container's own).
    package static let metaMask: UInt64 = ipv6Bit | 0xFFFF_FFFF_FFFF

    /// An address from its three words (the bits of `meta` outside ``metaMask`` are ignored).
    package init(high: UInt64, low: UInt64, meta: UInt64) {
        self.high = high
        self.low = low
        self.meta = meta & SocketAddress.metaMask
    }

    /// The IP address.
    public var ip: IPAddress {
        meta & SocketAddress.ipv6Bit != 0 ? .v6(IPv6Address(high: high, low: low)) : .v4(IPv4Address(UInt32(truncatingIfNeeded: low)))
    }
    /// The port, in host byte order (0 asks the kernel for an ephemeral port when binding).
    public var port: UInt16 { UInt16(truncatingIfNeeded: meta) }
    /// The IPv6 scope (interface index) of a link-local address; 0 for IPv4 and global addresses.
    public var scopeID: UInt32 { UInt32(truncatingIfNeeded: meta >> 16) }

    /// An address from its parts. The scope applies to IPv6 only (it is 0 for IPv4).
    public init(_ ip: IPAddress, port: UInt16, scopeID: UInt32 = 0) {
        switch ip {
        case .v4(let a):
            high = 0
            low = UInt64(a.value)
            meta = UInt64(port)
        case .v6(let a):
            high = a.high
            low = a.low
            meta = SocketAddress.ipv6Bit | UInt64(scopeID) << 16 | UInt64(port)
        }
    }

    /// The wildcard address (`0.0.0.0` or `::`) with `port`, as used to bind every interface
    /// (port 0 asks the kernel for an ephemeral port).
    public static func wildcard(ipv6: Bool, port: UInt16 = 0) -> SocketAddress {
        SocketAddress(ipv6 ? .v6(IPv6Address(high: 0, low: 0)) : .v4(IPv4Address(0)), port: port)
    }

    /// Creates an address from a numeric IP address (`"192.0.2.1"`, `"::1"`, no brackets; an
    /// IPv6 link-local address may carry a zone, `"fe80::1%eth0"`) and a port.
    /// - Throws: ``SocketAddressError`` when `ip` is not numeric.
    public init(ip: String, port: UInt16) throws(SocketAddressError) {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        let family = cs_sockaddr_from_text(ip, port, &storage, &length)
        guard family >= 0, let address = SocketAddress(storage: storage, length: length) else {
            throw SocketAddressError(text: ip, reason: "not a numeric IPv4 or IPv6 address")
        }
        self = address
    }

    /// Parses `"192.0.2.1:5060"` or `"[2001:db8::1]:5060"`. When `defaultPort` is given, the
    /// port may be left out (`"192.0.2.1"`, `"[::1]"`, or a bare `"::1"`).
    /// - Throws: ``SocketAddressError``.
    public init(_ text: String, defaultPort: UInt16? = nil) throws(SocketAddressError) {
        let ip: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw SocketAddressError(text: text, reason: "missing \"]\" after an IPv6 address")
            }
            ip = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == ":" else { throw SocketAddressError(text: text, reason: "expected \":port\" after \"]\"") }
                portText = rest.dropFirst()
            }
            guard ip.contains(":") else { throw SocketAddressError(text: text, reason: "only IPv6 addresses go in brackets") }
        } else {
            let colons = text.reduce(0) { $0 + ($1 == ":" ? 1 : 0) }
            if colons == 1, let colon = text.firstIndex(of: ":") {
                ip = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else if colons > 1 {
                guard defaultPort != nil else {
                    throw SocketAddressError(text: text, reason: "an IPv6 address with a port must be written [address]:port")
                }
                ip = text[...]
            } else {
                ip = text[...]
            }
        }
        let port: UInt16
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = UInt16(portText) else {
                throw SocketAddressError(text: text, reason: "the port is not a number from 0 to 65535")
            }
            port = value
        } else if let defaultPort {
            port = defaultPort
        } else {
            throw SocketAddressError(text: text, reason: "no port")
        }
        do {
            try self.init(ip: String(ip), port: port)
        } catch {
            throw SocketAddressError(text: text, reason: "not a numeric IPv4 or IPv6 address")
        }
    }

    /// Whether this is an IPv6 address.
    public var isIPv6: Bool { meta & SocketAddress.ipv6Bit != 0 }

    /// Whether the address is the wildcard (`0.0.0.0` or `::`), as used to bind every interface.
    public var isWildcard: Bool {
        switch ip {
        case .v4(let a): return a.value == 0
        case .v6(let a): return a.high == 0 && a.low == 0
        }
    }

    /// The same address with another port.
    public func withPort(_ port: UInt16) -> SocketAddress {
        SocketAddress(ip, port: port, scopeID: scopeID)
    }

    /// The address without brackets or port: `"192.0.2.1"`, `"2001:db8::1"`, `"fe80::1%2"`.
    public var ipString: String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = isIPv6 ? AF_INET6 : AF_INET
        withAddressBytes { raw in
            _ = buffer.withUnsafeMutableBufferPointer { out in
                cs_address_to_text(family, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), out.baseAddress, out.count)
            }
        }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return scopeID != 0 ? "\(text)%\(scopeID)" : text
    }

    /// `"192.0.2.1:5060"` or `"[2001:db8::1]:5060"`.
    public var description: String {
        isIPv6 ? "[\(ipString)]:\(port)" : "\(ipString):\(port)"
    }

    // MARK: sockaddr conversion

    /// Reads a `sockaddr_in` or `sockaddr_in6`; `nil` for any other family.
    package init?(storage: sockaddr_storage, length: socklen_t) {
        var bytes = (UInt64(0), UInt64(0))
        var port: UInt16 = 0
        var scope: UInt32 = 0
        var storage = storage
        let family = withUnsafeMutableBytes(of: &bytes) { raw in
            cs_sockaddr_parts(&storage, length, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), &port, &scope)
        }
        switch family {
        case AF_INET:
            let word = withUnsafeBytes(of: bytes) { $0.load(as: UInt32.self) }
            self.init(.v4(IPv4Address(UInt32(bigEndian: word))), port: port)
        case AF_INET6:
            self.init(.v6(IPv6Address(high: UInt64(bigEndian: bytes.0), low: UInt64(bigEndian: bytes.1))), port: port, scopeID: scope)
        default:
            return nil
        }
    }

    /// `AF_INET` or `AF_INET6`.
    package var family: Int32 { isIPv6 ? AF_INET6 : AF_INET }

    /// Calls `body` with the address bytes in network order (4 or 16).
    private func withAddressBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch ip {
        case .v4(let a):
            return withUnsafeBytes(of: a.value.bigEndian, body)
        case .v6(let a):
            return withUnsafeBytes(of: (a.high.bigEndian, a.low.bigEndian), body)
        }
    }

    /// The address as a `sockaddr_storage` and its length.
    package var sockaddr: (sockaddr_storage, socklen_t) {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        let family = self.family
        let scope = scopeID
        withAddressBytes { raw in
            _ = cs_sockaddr_make(family, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), port, scope, &storage, &length)
        }
        return (storage, length)
    }

    /// Calls `body` with the address as a `sockaddr` pointer and its length, for `bind`,
    /// `connect` or `sendto`.
    package func withSockaddr<R>(_ body: (UnsafePointer<Glibc.sockaddr>, socklen_t) -> R) -> R {
        var (storage, length) = sockaddr
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

/// Text that is not a numeric IP address (with a port where one is needed).
public struct SocketAddressError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text that was given.
    public let text: String
    /// What is wrong with it.
    public let reason: String

    /// `invalid address "text": reason`.
    public var description: String { "invalid address \"\(text)\": \(reason)" }
}
