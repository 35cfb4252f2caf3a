import Glibc
import NetworkIO
import Synchronization

/// Something that answers DNS lookups: ``DNSClient``, or a stand-in in tests.
public protocol DNSLookup: Sendable {
    /// The records of `type` for `name`, following CNAME aliases.
    ///
    /// Returns an empty array when the name exists but has no such records, and throws
    /// ``DNSError/nonexistentDomain(_:)`` when it does not exist.
    func resolve(_ name: String, type: DNSRecordType) async throws -> [DNSRecord]
}

/// A stub resolver: asks recursive name servers over UDP, retries over TCP when an answer is
/// truncated, and caches answers for their TTL.
///
/// Each query goes out from a fresh socket bound to a random port, with a random ID; an answer
/// counts only when it comes from the server asked and repeats the ID and the question
/// (RFC 5452 §9). Servers are tried in order, for ``DNSClientConfiguration/attempts`` rounds,
/// each wait bounded by ``DNSClientConfiguration/timeout``. The sockets are used from Dispatch
/// worker threads, so callers never block their executor; cancelling the calling task ends the
/// wait within 50 ms.
///
/// ```swift
/// let client = DNSClient(configuration: .system())
/// let records = try await client.resolve("_sip._udp.example.com", type: .srv)
/// ```
public final class DNSClient: DNSLookup, Sendable {
    /// The settings the client was created with.
    public let configuration: DNSClientConfiguration
    private let cache: Mutex<DNSCache>

    /// Creates a client; by default with the system's `/etc/resolv.conf` and `/etc/hosts`.
    public init(configuration: DNSClientConfiguration = .system()) {
        self.configuration = configuration
        cache = Mutex(DNSCache(capacity: configuration.cacheCapacity, maximumTTL: configuration.maximumCacheTTL))
    }

    /// The number of answers in the cache.
    public var cachedAnswerCount: Int { cache.withLock { $0.count } }

    /// Empties the cache.
    public func removeCachedAnswers() { cache.withLock { $0.removeAll() } }

    /// The records of `type` for `name` (see ``DNSLookup/resolve(_:type:)``).
    ///
    /// A and AAAA lookups consult ``DNSClientConfiguration/hosts`` first. Aliases are followed
    /// through the answer and, if the chain ends without the records, by asking for its last
    /// name (at most eight CNAMEs in all). The returned records carry the name they are held
    /// under (the canonical name), with their TTL reduced by the time spent in the cache.
    ///
    /// - Throws: ``DNSError``, or `CancellationError` when the task is cancelled.
    public func resolve(_ name: String, type: DNSRecordType) async throws -> [DNSRecord] {
        let qname: DNSName
        do {
            qname = try DNSName(name)
        } catch {
            throw DNSError.invalidName(name)
        }
        return try await resolve(qname, type: type, aliasesFollowed: 0, original: qname)
    }

    /// The records of `type` for `name` (see ``resolve(_:type:)``).
    public func resolve(_ name: DNSName, type: DNSRecordType) async throws -> [DNSRecord] {
        try await resolve(name, type: type, aliasesFollowed: 0, original: name)
    }

    static let maxAliases = 8

    /// Resolves `qname`, reached from `original` after following `aliasesFollowed` CNAMEs.
    private func resolve(_ qname: DNSName, type: DNSRecordType, aliasesFollowed: Int, original: DNSName) async throws -> [DNSRecord] {
        if type == .a || type == .aaaa, let hosts = configuration.hosts {
            let records = hosts.records(for: qname, type: type)
            if !records.isEmpty { return records }
        }
        switch cache.withLock({ $0.lookup(name: qname, type: type, now: .now) }) {
        case .records(let records)?: return records
        case .nonexistentDomain?: throw DNSError.nonexistentDomain(original.description)
        case nil: break
        }
        if configuration.nameservers.isEmpty {
            guard type == .a || type == .aaaa, configuration.usesSystemResolverWithoutNameservers else { throw DNSError.noNameservers }
            return try await SystemAddressResolver.lookup(qname, type: type)
        }
        let response = try await query(qname, type: type)

        // Follow the aliases the answer section carries.
        var current = qname
        var aliases = aliasesFollowed
        var ttl = UInt32.max
        var result = [DNSRecord]()
        while true {
            let matching = response.answers.filter { $0.name == current && $0.type == type && $0.recordClass == .internet }
            if !matching.isEmpty {
                result = matching
                break
            }
            guard type != .cname,
                  let alias = response.answers.first(where: { $0.name == current && $0.type == .cname }),
                  case .cname(let target) = alias.data else { break }
            aliases += 1
            guard aliases <= DNSClient.maxAliases else { throw DNSError.aliasChainTooLong(original.description) }
            ttl = min(ttl, alias.ttl)
            current = target
        }

        if response.responseCode == .nameError {
            // NXDOMAIN speaks of the last name of the chain (RFC 2308 §2.1).
            store(.nonexistentDomain, qname, type, ttl: min(ttl, negativeTTL(response)))
            throw DNSError.nonexistentDomain(original.description)
        }
        if result.isEmpty, current != qname {
            // The chain leads out of this answer: ask for where it ends.
            guard aliases < DNSClient.maxAliases else { throw DNSError.aliasChainTooLong(original.description) }
            let records = try await resolve(current, type: type, aliasesFollowed: aliases, original: original)
            store(.records(records), qname, type, ttl: records.reduce(ttl) { min($0, $1.ttl) })
            return records
        }
        let lifetime = result.isEmpty ? min(ttl, negativeTTL(response)) : result.reduce(ttl) { min($0, $1.ttl) }
        store(.records(result), qname, type, ttl: lifetime)
        return result
    }

    private func store(_ answer: DNSCache.Answer, _ name: DNSName, _ type: DNSRecordType, ttl: UInt32) {
        guard ttl != .max else { return }
        cache.withLock { $0.store(answer, name: name, type: type, ttl: ttl, now: .now) }
    }

    /// The TTL of a negative answer: the SOA record's TTL or its MINIMUM field, whichever is
    /// smaller (RFC 2308 §5), capped by the configuration; zero (not cached) without an SOA.
    private func negativeTTL(_ response: DNSMessage) -> UInt32 {
        for record in response.authorities {
            if case .soa(let soa) = record.data {
                return min(record.ttl, soa.minimum, configuration.maximumNegativeCacheTTL)
            }
        }
        return 0
    }

    /// Sends one query for `name` and `type` and returns the server's whole response, with no
    /// cache involved. Servers are tried in order for the configured rounds; a server answering
    /// SERVFAIL, REFUSED, FORMERR or NOTIMP, or not at all, passes the turn to the next. An
    /// answer with the TC bit is asked again over TCP.
    ///
    /// - Returns: a response with RCODE NOERROR or NXDOMAIN.
    /// - Throws: ``DNSError`` (the last failure seen), or `CancellationError`.
    public func query(_ name: DNSName, type: DNSRecordType) async throws -> DNSMessage {
        guard !configuration.nameservers.isEmpty else { throw DNSError.noNameservers }
        let question = DNSQuestion(name: name, type: type)
        let limits = configuration.limits
        let timeout = configuration.timeout
        var lastError = DNSError.timedOut
        for _ in 0..<max(1, configuration.attempts) {
            for server in configuration.nameservers {
                try Task.checkCancellation()
                let id = UInt16.random(in: 0...UInt16.max)
                let wire: [UInt8]
                do {
                    wire = try DNSMessage.query(id: id, name: name, type: type).encoded()
                } catch {
                    throw DNSError.invalidName(name.description)
                }
                do {
                    var response = try await runBlocking { flag in
                        try DNSSocketExchange.udp(wire, id: id, question: question, server: server, timeout: timeout, limits: limits, cancel: flag)
                    }
                    if response.isTruncated {
                        response = try await runBlocking { flag in
                            try DNSSocketExchange.tcp(wire, id: id, question: question, server: server, timeout: timeout, limits: limits, cancel: flag)
                        }
                    }
                    switch response.responseCode {
                    case .noError, .nameError: return response
                    default: lastError = .serverFailure(response.responseCode)
                    }
                } catch let failure as DNSExchangeFailure {
                    switch failure {
                    case .cancelled: throw CancellationError()
                    case .timedOut: lastError = .timedOut
                    case .socket(let op, let e): lastError = .socket(operation: op, errno: e)
                    case .malformed(let e): lastError = .malformedResponse(e)
                    case .mismatch: lastError = .mismatchedResponse
                    }
                }
            }
        }
        throw lastError
    }
}

/// A and AAAA lookups through the C library's resolver (`/etc/hosts`, then whatever
/// nsswitch.conf says), for when no name server is configured.
enum SystemAddressResolver {
    static func lookup(_ name: DNSName, type: DNSRecordType) async throws -> [DNSRecord] {
        let text = name.description
        let family = type == .a ? AF_INET : AF_INET6
        return try await runBlocking { _ in try blockingLookup(text, name: name, family: family) }
    }

    static func blockingLookup(_ text: String, name: DNSName, family: Int32) throws -> [DNSRecord] {
        var hints = addrinfo()
        hints.ai_family = family
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(text, nil, &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        switch rc {
        case 0: break
        case EAI_AGAIN: throw DNSError.timedOut
        case EAI_FAIL: throw DNSError.serverFailure(.serverFailure)
        case EAI_MEMORY, EAI_SYSTEM: throw DNSError.socket(operation: "getaddrinfo", errno: errno)
        default: return []
        }
        var records = [DNSRecord]()
        var node = list
        while let info = node?.pointee {
            defer { node = info.ai_next }
            guard let address = info.ai_addr else { continue }
            let data: DNSRecordData
            if info.ai_family == AF_INET {
                let sin = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
                data = .a(IPv4Address(UInt32(bigEndian: sin.sin_addr.s_addr)))
            } else if info.ai_family == AF_INET6 {
                let sin6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
                guard let v6 = IPv6Address(bytes: bytes) else { continue }
                data = .aaaa(v6)
            } else {
                continue
            }
            let record = DNSRecord(name: name, ttl: 0, data: data)
            if !records.contains(record) { records.append(record) }
        }
        return records
    }
}
