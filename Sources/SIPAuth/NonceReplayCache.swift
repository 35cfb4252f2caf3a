/// A bounded least-recently-used map from nonce to the highest nonce count accepted with it.
///
/// Entries live in arrays linked as a doubly linked list (most recent at the head); a full
/// cache evicts its tail. `evictedIssueTime` is the latest issue time of any evicted nonce:
/// a nonce absent from the cache but issued no later than that may have been used before, so
/// the server answers it with a fresh challenge (stale) instead of trusting its nonce count.
struct NonceReplayCache: Sendable {
    struct Entry: Sendable {
        var nonce: String
        var issued: Int64
        var highest: UInt32
        var prev: Int
        var next: Int
    }

    let capacity: Int
    var entries: [Entry] = []
    var index: [String: Int] = [:]
    var head = -1
    var tail = -1
    /// The latest issue time among evicted nonces (`Int64.min` when none was evicted).
    var evictedIssueTime = Int64.min

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        entries.reserveCapacity(min(self.capacity, 1024))
    }

    var count: Int { index.count }

    /// The highest nonce count accepted for `nonce`, if remembered.
    func highest(_ nonce: String) -> UInt32? {
        index[nonce].map { entries[$0].highest }
    }

    /// Records `nc` as the highest count of `nonce` and makes it the most recent entry.
    mutating func record(_ nonce: String, issued: Int64, nc: UInt32) {
        if let i = index[nonce] {
            entries[i].highest = max(entries[i].highest, nc)
            unlink(i)
            pushFront(i)
            return
        }
        let slot: Int
        if index.count >= capacity {
            slot = tail
            unlink(slot)
            let old = entries[slot]
            index[old.nonce] = nil
            evictedIssueTime = max(evictedIssueTime, old.issued)
            entries[slot] = Entry(nonce: nonce, issued: issued, highest: nc, prev: -1, next: -1)
        } else {
            slot = entries.count
            entries.append(Entry(nonce: nonce, issued: issued, highest: nc, prev: -1, next: -1))
        }
        index[nonce] = slot
        pushFront(slot)
    }

    private mutating func unlink(_ i: Int) {
        let p = entries[i].prev, n = entries[i].next
        if p >= 0 { entries[p].next = n } else { head = n }
        if n >= 0 { entries[n].prev = p } else { tail = p }
        entries[i].prev = -1
        entries[i].next = -1
    }

    private mutating func pushFront(_ i: Int) {
        entries[i].prev = -1
        entries[i].next = head
        if head >= 0 { entries[head].prev = i }
        head = i
        if tail < 0 { tail = i }
    }
}
