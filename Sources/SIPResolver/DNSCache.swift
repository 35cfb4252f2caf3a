import NetworkIO

/// A bounded cache of DNS answers that honours their TTLs.
///
/// Pure: the caller passes the current instant to every call, so tests drive time by hand.
/// Positive answers live for the smallest TTL among their records, negative ones (NXDOMAIN, or
/// no records of the type) for the TTL derived from the zone's SOA (RFC 2308 §5); both are
/// capped at ``maximumTTL``. A TTL of zero is not cached. When full, expired entries go first,
/// then those closest to expiry.
public struct DNSCache: Sendable {
    /// A cached answer.
    public enum Answer: Sendable, Hashable {
        /// The records of the asked type (possibly none: "no data").
        case records([DNSRecord])
        /// The name does not exist (NXDOMAIN).
        case nonexistentDomain
    }

    struct Key: Hashable {
        var name: DNSName
        var type: DNSRecordType
    }

    struct Entry {
        var answer: Answer
        var stored: MonotonicClock.Instant
        var expires: MonotonicClock.Instant
    }

    /// The most entries kept.
    public let capacity: Int
    /// The longest time, in seconds, any answer is kept, whatever its TTL.
    public let maximumTTL: UInt32
    var entries: [Key: Entry] = [:]

    /// Creates an empty cache holding at most `capacity` answers for at most `maximumTTL` seconds.
    public init(capacity: Int = 256, maximumTTL: UInt32 = 3600) {
        self.capacity = max(0, capacity)
        self.maximumTTL = maximumTTL
    }

    /// The number of entries held (expired ones included until they are looked up or evicted).
    public var count: Int { entries.count }

    /// Stores an answer for `ttl` seconds from `now`.
    public mutating func store(_ answer: Answer, name: DNSName, type: DNSRecordType, ttl: UInt32, now: MonotonicClock.Instant) {
        let seconds = min(ttl, maximumTTL)
        guard seconds > 0, capacity > 0 else { return }
        let key = Key(name: name, type: type)
        if entries[key] == nil, entries.count >= capacity { evict(now: now) }
        entries[key] = Entry(answer: answer, stored: now, expires: now + .seconds(Int64(seconds)))
    }

    /// The answer stored for `name` and `type` if it has not expired, with each record's TTL
    /// reduced by the time it has spent in the cache. Expired entries are removed.
    public mutating func lookup(name: DNSName, type: DNSRecordType, now: MonotonicClock.Instant) -> Answer? {
        let key = Key(name: name, type: type)
        guard let entry = entries[key] else { return nil }
        guard now < entry.expires else {
            entries[key] = nil
            return nil
        }
        guard case .records(let records) = entry.answer else { return entry.answer }
        let elapsed = (now - entry.stored).components.seconds
        return .records(records.map { r in
            var r = r
            r.ttl = elapsed >= Int64(r.ttl) ? 0 : r.ttl - UInt32(truncatingIfNeeded: elapsed)
            return r
        })
    }

    /// Removes every entry.
    public mutating func removeAll() { entries.removeAll() }

    mutating func evict(now: MonotonicClock.Instant) {
        entries = entries.filter { $0.value.expires > now }
        while entries.count >= capacity, let soonest = entries.min(by: { $0.value.expires < $1.value.expires }) {
            entries[soonest.key] = nil
        }
    }
}
