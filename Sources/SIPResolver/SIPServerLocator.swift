import NetworkIO
import SIPMessage

/// Why a SIP URI could not be turned into targets.
public enum SIPLocationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URI asks for a transport this locator does not offer (`transport=sctp`, `ws`, UDP
    /// for a SIPS URI, or one left out of ``SIPServerLocator/Configuration/transports``).
    case unsupportedTransport(String)
    /// The `maddr` parameter is not a host.
    case invalidHost(String)
    /// DNS worked but gave no address for the domain.
    case noTargets(String)
    /// DNS failed (time-out, server failure, …) and nothing was found; carries the domain and
    /// the first failure.
    case lookupFailed(String, DNSError)

    public var description: String {
        switch self {
        case .unsupportedTransport(let t): return "unsupported transport '\(t)'"
        case .invalidHost(let h): return "invalid host '\(h)'"
        case .noTargets(let d): return "\(d): no SIP server found"
        case .lookupFailed(let d, let e): return "\(d): \(e)"
        }
    }
}

/// Locates the servers for a SIP or SIPS URI (RFC 3263 §4): an ordered list of transport,
/// address and port to try in turn.
///
/// The procedure, for the URI's `maddr` if it has one, else its host:
/// - an IP address is used as it is, with the `transport` parameter's protocol (else UDP for
///   `sip:`, TLS for `sips:`) and the URI's port (else 5060, or 5061 for TLS);
/// - a domain with a port is looked up for A/AAAA only;
/// - a domain with a `transport` parameter but no port is looked up for that transport's SRV
///   records (`_sip._udp`, `_sip._tcp`, `_sips._tcp`);
/// - otherwise NAPTR records choose the transports and their SRV names (services `SIP+D2U`,
///   `SIP+D2T`, `SIPS+D2T`, flag `S`; only `SIPS+D2T` for `sips:`), in order and preference;
///   without usable NAPTR records, SRV is asked for every supported transport, in the order
///   of ``Configuration/transports``;
/// - SRV records are ordered by priority and weighted random choice (``SRVOrdering``), and each
///   target's A/AAAA records give the addresses; a lone target of `.` means "no service";
/// - when no SRV record exists at all, the domain's own A/AAAA records are used with the
///   transport chosen so far (UDP for `sip:`, TLS for `sips:`) and its default port.
///
/// Lookups that are independent run concurrently. Duplicates are removed, and the list is cut
/// at ``Configuration/maximumTargets``.
///
/// ```swift
/// let locator = SIPServerLocator(lookup: DNSClient())
/// for target in try await locator.resolve(try SIPURI("sip:alice@example.com")) {
///     // try target.transport, target.address, target.port in turn
/// }
/// ```
public struct SIPServerLocator: Sendable {
    /// Which address families to use, and in which order.
    public enum AddressPreference: Sendable, Hashable {
        /// A records only.
        case ipv4Only
        /// AAAA records only.
        case ipv6Only
        /// A records, then AAAA records, for each host.
        case ipv4First
        /// AAAA records, then A records, for each host.
        case ipv6First
    }

    /// Settings of a ``SIPServerLocator``.
    public struct Configuration: Sendable, Hashable {
        /// The transports the client supports, in order of preference (used when there are no
        /// NAPTR records).
        public var transports: [ResolvedTarget.Transport]
        /// Which address families to use.
        public var addressPreference: AddressPreference
        /// The most targets returned.
        public var maximumTargets: Int
        /// The most NAPTR records followed to SRV lookups.
        public var maximumNAPTRRecords: Int

        /// Creates a configuration; by default UDP, TCP and TLS, IPv4 before IPv6, at most 32
        /// targets from at most 8 NAPTR records.
        public init(transports: [ResolvedTarget.Transport] = [.udp, .tcp, .tls], addressPreference: AddressPreference = .ipv4First,
                    maximumTargets: Int = 32, maximumNAPTRRecords: Int = 8) {
            self.transports = transports
            self.addressPreference = addressPreference
            self.maximumTargets = maximumTargets
            self.maximumNAPTRRecords = maximumNAPTRRecords
        }
    }

    /// Where DNS answers come from.
    public let lookup: any DNSLookup
    /// The settings.
    public let configuration: Configuration

    /// Creates a locator asking `lookup`.
    public init(lookup: any DNSLookup, configuration: Configuration = Configuration()) {
        self.lookup = lookup
        self.configuration = configuration
    }

    /// The targets for `uri`, in the order to try them, with SRV weights drawn from the
    /// system's random number generator.
    ///
    /// - Throws: ``SIPLocationError``, or `CancellationError`.
    public func resolve(_ uri: SIPURI) async throws -> [ResolvedTarget] {
        var generator = SystemRandomNumberGenerator()
        return try await resolve(uri, using: &generator)
    }

    /// The targets for `uri`, in the order to try them, with SRV weights drawn from
    /// `generator` (pass a seeded one for reproducible orders).
    ///
    /// - Throws: ``SIPLocationError``, or `CancellationError`.
    public func resolve(_ uri: SIPURI, using generator: inout some RandomNumberGenerator) async throws -> [ResolvedTarget] {
        let secure = uri.secure
        let explicit = try explicitTransport(uri)
        var host = uri.host
        if let maddr = uri.maddr {
            do {
                host = try SIPHost.parse(maddr)
            } catch {
                throw SIPLocationError.invalidHost(maddr)
            }
        }
        // Without a transport parameter: UDP for sip: (TLS for sips:), or the first supported.
        let plainTransport: ResolvedTarget.Transport
        if let explicit {
            plainTransport = explicit
        } else if secure {
            guard configuration.transports.contains(.tls) else { throw SIPLocationError.unsupportedTransport("tls") }
            plainTransport = .tls
        } else {
            guard let first = configuration.transports.contains(.udp) ? .udp : configuration.transports.first else {
                throw SIPLocationError.unsupportedTransport("udp")
            }
            plainTransport = first
        }

        let domain: String
        switch host {
        case .ipv4(let text), .ipv6(let text):
            guard let ip = IPAddress(text) else { throw SIPLocationError.invalidHost(text) }
            return [ResolvedTarget(transport: plainTransport, address: ip.description, port: uri.port ?? plainTransport.defaultPort)]
        case .domain(let name):
            domain = name.hasSuffix(".") ? String(name.dropLast()) : name
        }

        var failures = [any Error]()
        if let port = uri.port {
            // §4.2: a port in the URI means no SRV; the host's addresses with that port.
            let targets = await addressTargets(domain, transport: plainTransport, port: port, failures: &failures)
            return try finish(targets, domain: domain, failures: failures)
        }

        // The SRV names to ask for, each with the transport it stands for.
        var candidates = [(ResolvedTarget.Transport, String)]()
        var fallbackTransport = plainTransport
        if let transport = explicit {
            candidates = [(transport, Self.srvPrefix(transport) + domain)]
        } else {
            let naptr = await fetch(domain, .naptr)
            if let failure = naptr.failure { failures.append(failure) }
            candidates = usableNAPTR(naptr.records, secure: secure)
            if let first = candidates.first {
                fallbackTransport = first.0
            } else {
                let allowed = secure ? configuration.transports.filter { $0 == .tls } : configuration.transports
                candidates = allowed.map { ($0, Self.srvPrefix($0) + domain) }
            }
        }
        try checkCancellation(failures)

        let outcomes = await fetchAll(candidates.map { ($0.1, .srv) })
        var located = [(transport: ResolvedTarget.Transport, host: String, port: UInt16)]()
        var sawSRV = false
        for (candidate, outcome) in zip(candidates, outcomes) {
            if let failure = outcome.failure { failures.append(failure) }
            let records = outcome.records.compactMap { r -> DNSSRVRecord? in
                if case .srv(let s) = r.data { return s } else { return nil }
            }
            if !records.isEmpty { sawSRV = true }
            for s in SRVOrdering.order(records, using: &generator) where !s.target.isRoot {
                located.append((candidate.0, s.target.description, s.port))
            }
        }
        try checkCancellation(failures)

        guard sawSRV else {
            // §4.2: no SRV records, so the domain's addresses at the transport's default port.
            let targets = await addressTargets(domain, transport: fallbackTransport, port: fallbackTransport.defaultPort, failures: &failures)
            return try finish(targets, domain: domain, failures: failures)
        }
        var names = [String]()
        for l in located where !names.contains(l.host) { names.append(l.host) }
        let addresses = await addresses(of: names, failures: &failures)
        var targets = [ResolvedTarget]()
        for l in located {
            for address in addresses[l.host] ?? [] {
                targets.append(ResolvedTarget(transport: l.transport, address: address, port: l.port, serverName: domain))
            }
        }
        return try finish(targets, domain: domain, failures: failures)
    }

    // MARK: - Steps

    /// The transport the URI's `transport` parameter asks for, if any.
    func explicitTransport(_ uri: SIPURI) throws(SIPLocationError) -> ResolvedTarget.Transport? {
        guard let parameter = uri.transport else { return nil }
        let transport: ResolvedTarget.Transport
        switch parameter {
        case "udp" where !uri.secure: transport = .udp
        case "tcp": transport = uri.secure ? .tls : .tcp
        case "tls": transport = .tls
        default: throw .unsupportedTransport(parameter)
        }
        guard configuration.transports.contains(transport) else { throw .unsupportedTransport(parameter) }
        return transport
    }

    /// The SRV owner-name prefix for a transport (RFC 3263 §4.1).
    static func srvPrefix(_ transport: ResolvedTarget.Transport) -> String {
        switch transport {
        case .udp: return "_sip._udp."
        case .tcp: return "_sip._tcp."
        case .tls: return "_sips._tcp."
        }
    }

    /// The NAPTR records this client can follow, as (transport, SRV name), in order and
    /// preference (RFC 3403 §4.1, RFC 3263 §4.1).
    func usableNAPTR(_ records: [DNSRecord], secure: Bool) -> [(ResolvedTarget.Transport, String)] {
        let naptrs = records.enumerated().compactMap { (i, r) -> (Int, DNSNAPTRRecord, ResolvedTarget.Transport)? in
            guard case .naptr(let n) = r.data, n.flags.lowercased() == "s", n.regexp.isEmpty, !n.replacement.isRoot else { return nil }
            let transport: ResolvedTarget.Transport
            switch n.services.uppercased() {
            case "SIP+D2U" where !secure: transport = .udp
            case "SIP+D2T" where !secure: transport = .tcp
            case "SIPS+D2T": transport = .tls
            default: return nil
            }
            guard configuration.transports.contains(transport) else { return nil }
            return (i, n, transport)
        }
        let sorted = naptrs.sorted { a, b in
            (a.1.order, a.1.preference, a.0) < (b.1.order, b.1.preference, b.0)
        }
        var result = [(ResolvedTarget.Transport, String)]()
        for (_, n, transport) in sorted {
            let name = n.replacement.description
            guard !result.contains(where: { $0.0 == transport && $0.1.lowercased() == name.lowercased() }) else { continue }
            result.append((transport, name))
            if result.count >= configuration.maximumNAPTRRecords { break }
        }
        return result
    }

    /// The A/AAAA record types to ask for, in order.
    var addressTypes: [DNSRecordType] {
        switch configuration.addressPreference {
        case .ipv4Only: return [.a]
        case .ipv6Only: return [.aaaa]
        case .ipv4First: return [.a, .aaaa]
        case .ipv6First: return [.aaaa, .a]
        }
    }

    /// The addresses of each name, in the preferred family order, without duplicates.
    func addresses(of names: [String], failures: inout [any Error]) async -> [String: [String]] {
        let types = addressTypes
        let queries = names.flatMap { name in types.map { (name, $0) } }
        let outcomes = await fetchAll(queries)
        var result = [String: [String]]()
        for ((name, _), outcome) in zip(queries, outcomes) {
            if let failure = outcome.failure { failures.append(failure) }
            for r in outcome.records {
                let text: String
                switch r.data {
                case .a(let a): text = a.description
                case .aaaa(let a): text = a.description
                default: continue
                }
                if !(result[name]?.contains(text) ?? false) { result[name, default: []].append(text) }
            }
        }
        return result
    }

    func addressTargets(_ domain: String, transport: ResolvedTarget.Transport, port: UInt16, failures: inout [any Error]) async -> [ResolvedTarget] {
        let addresses = await addresses(of: [domain], failures: &failures)
        return (addresses[domain] ?? []).map { ResolvedTarget(transport: transport, address: $0, port: port, serverName: domain) }
    }

    /// Removes duplicates and caps the list; with nothing found, throws the first failure.
    func finish(_ targets: [ResolvedTarget], domain: String, failures: [any Error]) throws -> [ResolvedTarget] {
        try checkCancellation(failures)
        var unique = [ResolvedTarget]()
        for t in targets where !unique.contains(where: { $0.transport == t.transport && $0.address == t.address && $0.port == t.port }) {
            unique.append(t)
            if unique.count >= configuration.maximumTargets { break }
        }
        guard unique.isEmpty else { return unique }
        if let first = failures.first {
            if let dns = first as? DNSError { throw SIPLocationError.lookupFailed(domain, dns) }
            throw first
        }
        throw SIPLocationError.noTargets(domain)
    }

    func checkCancellation(_ failures: [any Error]) throws {
        if let cancelled = failures.first(where: { $0 is CancellationError }) { throw cancelled }
        try Task.checkCancellation()
    }

    // MARK: - Lookups

    struct Outcome: Sendable {
        var records: [DNSRecord] = []
        var failure: (any Error)? = nil
    }

    /// One lookup; a name that does not exist, or no name server for it, counts as no records.
    func fetch(_ name: String, _ type: DNSRecordType) async -> Outcome {
        do {
            return Outcome(records: try await lookup.resolve(name, type: type))
        } catch DNSError.nonexistentDomain {
            return Outcome()
        } catch DNSError.noNameservers {
            return Outcome()
        } catch {
            return Outcome(failure: error)
        }
    }

    /// Runs lookups concurrently; the outcomes are in the order of `queries`.
    func fetchAll(_ queries: [(String, DNSRecordType)]) async -> [Outcome] {
        if queries.count == 1 { return [await fetch(queries[0].0, queries[0].1)] }
        return await withTaskGroup(of: (Int, Outcome).self) { group in
            for (i, q) in queries.enumerated() {
                group.addTask { (i, await self.fetch(q.0, q.1)) }
            }
            var outcomes = [Outcome](repeating: Outcome(), count: queries.count)
            for await (i, outcome) in group { outcomes[i] = outcome }
            return outcomes
        }
    }
}
