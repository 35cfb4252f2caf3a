import NetworkIO

/// Settings of a ``DNSClient``.
public struct DNSClientConfiguration: Sendable, Hashable {
    /// The servers to ask, in order. When empty, A and AAAA lookups go to the system resolver
    /// (`getaddrinfo`) if ``usesSystemResolverWithoutNameservers`` is set, and other lookups
    /// fail with ``DNSError/noNameservers``.
    public var nameservers: [SocketAddress]
    /// How long to wait for one answer from one server (UDP, or the whole TCP exchange).
    public var timeout: Duration
    /// How many rounds over ``nameservers`` to make before giving up (at least one).
    public var attempts: Int
    /// The most answers the cache holds; zero disables caching.
    public var cacheCapacity: Int
    /// The longest time, in seconds, a positive answer is cached, whatever its TTL.
    public var maximumCacheTTL: UInt32
    /// The longest time, in seconds, a negative answer (NXDOMAIN or no data) is cached.
    public var maximumNegativeCacheTTL: UInt32
    /// A host table consulted for A and AAAA before any query; `nil` for none.
    public var hosts: HostsFile?
    /// Whether A and AAAA lookups use `getaddrinfo` when no name server is configured.
    public var usesSystemResolverWithoutNameservers: Bool
    /// The limits responses are parsed under.
    public var limits: DNSParserLimits

    /// Creates a configuration.
    ///
    /// The defaults wait 2 s per server and make two rounds, cache 256 answers for at most an
    /// hour (five minutes when negative), consult no host table, and fall back to the system
    /// resolver for addresses only when `nameservers` is empty.
    public init(nameservers: [SocketAddress], timeout: Duration = .seconds(2), attempts: Int = 2,
                cacheCapacity: Int = 256, maximumCacheTTL: UInt32 = 3600, maximumNegativeCacheTTL: UInt32 = 300,
                hosts: HostsFile? = nil, usesSystemResolverWithoutNameservers: Bool = true, limits: DNSParserLimits = .default) {
        self.nameservers = nameservers
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.cacheCapacity = cacheCapacity
        self.maximumCacheTTL = maximumCacheTTL
        self.maximumNegativeCacheTTL = maximumNegativeCacheTTL
        self.hosts = hosts
        self.usesSystemResolverWithoutNameservers = usesSystemResolverWithoutNameservers
        self.limits = limits
    }

    /// Reads `resolv.conf`-format text (resolv.conf(5)): `nameserver` lines (at most three are
    /// used, as the C library does; unparsable ones and zoned IPv6 are skipped) and the
    /// `timeout:n` (1–30 s) and `attempts:n` (1–5) options. Other settings (`search`, `ndots`)
    /// do not apply: SIP names are fully qualified.
    public init(resolvConf text: String, hosts: HostsFile? = nil) {
        var servers = [SocketAddress]()
        var timeout = Duration.seconds(2)
        var attempts = 2
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let keyword = fields.first, !keyword.hasPrefix("#"), !keyword.hasPrefix(";") else { continue }
            switch keyword {
            case "nameserver":
                if fields.count >= 2, servers.count < 3, let ip = IPAddress(String(fields[1])) {
                    servers.append(SocketAddress(ip, port: 53))
                }
            case "options":
                for option in fields.dropFirst() {
                    if option.hasPrefix("timeout:"), let n = Int(option.dropFirst(8)) {
                        timeout = .seconds(min(max(n, 1), 30))
                    } else if option.hasPrefix("attempts:"), let n = Int(option.dropFirst(9)) {
                        attempts = min(max(n, 1), 5)
                    }
                }
            default:
                continue
            }
        }
        self.init(nameservers: servers, timeout: timeout, attempts: attempts, hosts: hosts)
    }

    /// The system's settings: `/etc/resolv.conf` and `/etc/hosts` (or the given paths). A
    /// missing resolv.conf gives no name servers.
    public static func system(resolvConfPath: String = "/etc/resolv.conf", hostsPath: String = "/etc/hosts") -> DNSClientConfiguration {
        let text = readSmallFile(resolvConfPath, limit: 1 << 20).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return DNSClientConfiguration(resolvConf: text, hosts: HostsFile(path: hostsPath))
    }
}

/// Why a DNS lookup failed.
public enum DNSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name is not a valid domain name.
    case invalidName(String)
    /// The name does not exist (NXDOMAIN).
    case nonexistentDomain(String)
    /// Every server answered with this error code (SERVFAIL, REFUSED, FORMERR, NOTIMP, …).
    case serverFailure(DNSResponseCode)
    /// No server answered in time.
    case timedOut
    /// No name server is configured for a lookup that needs one.
    case noNameservers
    /// A server's answer could not be parsed.
    case malformedResponse(DNSParseError)
    /// CNAME records chain more than eight times, or loop.
    case aliasChainTooLong(String)
    /// A socket call failed with this errno (connection refused by every server, …).
    case socket(operation: String, errno: Int32)
    /// An answer over TCP did not repeat the query's ID and question.
    case mismatchedResponse

    public var description: String {
        switch self {
        case .invalidName(let n): return "invalid domain name '\(n)'"
        case .nonexistentDomain(let n): return "\(n): no such domain"
        case .serverFailure(let c): return "server failure (\(c))"
        case .timedOut: return "no answer from any name server"
        case .noNameservers: return "no name server configured"
        case .malformedResponse(let e): return "malformed response: \(e)"
        case .aliasChainTooLong(let n): return "\(n): CNAME chain too long"
        case .socket(let op, let e): return "\(op) failed (errno \(e))"
        case .mismatchedResponse: return "answer does not match the query"
        }
    }
}
