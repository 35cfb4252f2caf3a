/// The order in which to try the hosts of an SRV record set (RFC 2782, "Usage rules").
public enum SRVOrdering {
    /// Orders `records` by ascending priority and, within one priority, by weighted random
    /// selection: records of weight 0 are put first, a number is drawn uniformly from
    /// 0 through the sum of the remaining weights, the first record whose running sum of
    /// weights reaches it is taken next, and so on until none remain.
    ///
    /// Pass a seeded generator for reproducible orders. Records whose target is `.` are kept;
    /// the caller decides what "service not available" means to it.
    public static func order(_ records: [DNSSRVRecord], using generator: inout some RandomNumberGenerator) -> [DNSSRVRecord] {
        let priorities = Set(records.map(\.priority)).sorted()
        var ordered = [DNSSRVRecord]()
        ordered.reserveCapacity(records.count)
        for priority in priorities {
            let group = records.filter { $0.priority == priority }
            var remaining = group.filter { $0.weight == 0 } + group.filter { $0.weight != 0 }
            while !remaining.isEmpty {
                let total = remaining.reduce(0) { $0 + Int($1.weight) }
                let draw = total == 0 ? 0 : Int.random(in: 0...total, using: &generator)
                var running = 0
                var chosen = remaining.count - 1
                for (i, r) in remaining.enumerated() {
                    running += Int(r.weight)
                    if running >= draw {
                        chosen = i
                        break
                    }
                }
                ordered.append(remaining.remove(at: chosen))
            }
        }
        return ordered
    }

    /// ``order(_:using:)`` with the system's random number generator.
    public static func order(_ records: [DNSSRVRecord]) -> [DNSSRVRecord] {
        var generator = SystemRandomNumberGenerator()
        return order(records, using: &generator)
    }
}
