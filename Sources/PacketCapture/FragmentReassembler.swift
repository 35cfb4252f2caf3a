/// Identifies the fragments of one IP datagram (RFC 791 §3.2; RFC 8200 §4.5).
struct FragmentKey: Hashable, Sendable {
    var version: UInt8
    var source: [UInt8]
    var destination: [UInt8]
    var identification: UInt32
    /// The IPv4 protocol (0 for IPv6, whose next header comes from the first fragment).
    var protocolNumber: UInt8
}

/// Reassembles IP datagrams from fragments, with the hole-filling idea of RFC 815 kept as a
/// sorted list of covered byte ranges.
///
/// Overlaps are handled deterministically: for IPv4 the bytes that arrived first win (later
/// fragments only fill holes); for IPv6 the whole datagram is discarded (RFC 5722). Memory is
/// bounded by a number of pending datagrams and of buffered bytes: the oldest datagram is
/// dropped to make room. Datagrams not completed within the timeout (capture time) are dropped.
struct FragmentReassembler: Sendable {
    struct Pending: Sendable {
        var data: [UInt8] = []
        var covered: [Range<Int>] = []
        var totalLength: Int?
        var nextHeader: UInt8?
        var firstSeen: CaptureTimestamp
        var fragments = 0
    }

    enum Outcome: Sendable {
        case incomplete
        case complete(payload: [UInt8], nextHeader: UInt8, fragments: Int)
    }

    var maxDatagrams: Int
    var maxBytes: Int
    var timeoutNanoseconds: Int64
    private(set) var pending: [FragmentKey: Pending] = [:]
    private(set) var pendingBytes = 0

    init(maxDatagrams: Int, maxBytes: Int, timeoutNanoseconds: Int64) {
        self.maxDatagrams = maxDatagrams
        self.maxBytes = maxBytes
        self.timeoutNanoseconds = timeoutNanoseconds
    }

    /// Drops datagrams older than the timeout; returns how many were dropped.
    mutating func expire(now: CaptureTimestamp) -> Int {
        guard !pending.isEmpty else { return 0 }
        let limit = now.totalNanoseconds &- timeoutNanoseconds
        let old = pending.filter { $0.value.firstSeen.totalNanoseconds < limit }
        for (k, v) in old {
            pending[k] = nil
            pendingBytes -= v.data.count
        }
        return old.count
    }

    /// Adds one fragment. `anomalies` receives what went wrong, if anything.
    mutating func add(key: FragmentKey, offset: Int, payload: ArraySlice<UInt8>, more: Bool, nextHeader: UInt8,
                      at time: CaptureTimestamp, discardOnOverlap: Bool, anomalies: inout [CaptureAnomaly.Kind]) -> Outcome {
        let end = offset + payload.count
        guard end <= 65535 else {
            anomalies.append(.badFragment("fragment ends at byte \(end), past the 65535-byte maximum"))
            drop(key)
            return .incomplete
        }
        if pending[key] == nil {
            // Make room: evict the oldest datagrams.
            while pending.count >= maxDatagrams || (pendingBytes + end > maxBytes && !pending.isEmpty) {
                guard let oldest = pending.min(by: { $0.value.firstSeen < $1.value.firstSeen })?.key else { break }
                drop(oldest)
                anomalies.append(.fragmentsEvicted)
            }
            pending[key] = Pending(firstSeen: time)
        }
        var p = pending[key]!
        p.fragments += 1
        if let t = p.totalLength, end > t || (!more && end != t) {
            anomalies.append(.badFragment("fragment \(offset)..<\(end) disagrees with the total length \(t)"))
            drop(key)
            return .incomplete
        }
        if !more {
            if let last = p.covered.last, last.upperBound > end {
                anomalies.append(.badFragment("last fragment ends at \(end) but bytes up to \(last.upperBound) arrived"))
                drop(key)
                return .incomplete
            }
            p.totalLength = end
        }
        if offset == 0 { p.nextHeader = nextHeader }
        // Which parts are new, and whether old parts are overlapped.
        var holes: [Range<Int>] = []
        var cursor = offset
        var overlapDiffers = false, overlapped = false
        for r in p.covered where r.upperBound > offset && r.lowerBound < end {
            if r.lowerBound > cursor { holes.append(cursor..<r.lowerBound) }
            overlapped = true
            let lo = max(r.lowerBound, offset), hi = min(r.upperBound, end)
            for i in lo..<hi where p.data[i] != payload[payload.startIndex + i - offset] { overlapDiffers = true; break }
            cursor = max(cursor, r.upperBound)
        }
        if cursor < end { holes.append(cursor..<end) }
        if overlapped {
            anomalies.append(.overlappingFragments(identical: !overlapDiffers, discarded: discardOnOverlap))
            if discardOnOverlap {
                drop(key)
                return .incomplete
            }
        }
        if p.data.count < end {
            let grow = end - p.data.count
            if pendingBytes + grow > maxBytes {
                anomalies.append(.fragmentsEvicted)
                drop(key)
                return .incomplete
            }
            p.data.append(contentsOf: repeatElement(0, count: grow))
            pendingBytes += grow
        }
        for h in holes {
            p.data.replaceSubrange(h, with: payload[(payload.startIndex + h.lowerBound - offset)..<(payload.startIndex + h.upperBound - offset)])
        }
        p.covered = Self.merge(p.covered + holes)
        if let t = p.totalLength, p.covered.count == 1, p.covered[0] == 0..<t, let nh = p.nextHeader {
            drop(key)
            return .complete(payload: Array(p.data[0..<t]), nextHeader: nh, fragments: p.fragments)
        }
        pending[key] = p
        return .incomplete
    }

    private mutating func drop(_ key: FragmentKey) {
        if let p = pending.removeValue(forKey: key) { pendingBytes -= p.data.count }
    }

    private static func merge(_ ranges: [Range<Int>]) -> [Range<Int>] {
        var out: [Range<Int>] = []
        for r in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) where !r.isEmpty {
            if let last = out.last, r.lowerBound <= last.upperBound {
                out[out.count - 1] = last.lowerBound..<max(last.upperBound, r.upperBound)
            } else {
                out.append(r)
            }
        }
        return out
    }
}
