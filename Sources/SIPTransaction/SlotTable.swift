/// Values in numbered slots, kept in fixed-size chunks that never move: the table behind the
/// transaction layer's transactions, the endpoint's running timers and the timer service's
/// actions.
///
/// A server under load holds tens of thousands of these (a transaction lingers 32 s after its
/// call for retransmissions), and the table grows with them for the first half minute. A hash
/// table or a flat array grows by copying everything it holds into a new buffer, every page of
/// it touched for the first time (page faults, most of a growing server's kernel time); a chunk
/// here is allocated once and filled in place, and a slot is found by indexing, without
/// hashing. Vacated slots are reused, most recent first (warm in the cache).
///
/// The owner keeps its own record of which slot holds what (the transaction layer puts the slot
/// in the transaction's id, next to a sequence number that tells a reused slot apart).
@usableFromInline
package struct SlotTable<Element> {
    /// A chunk holds a power of two of slots, 128 KiB to 256 KiB of them (at least 64 slots):
    /// past the allocator's threshold, so a chunk is mapped on its own, not carved from the
    /// heap a page at a time (an `mprotect` call each). A transaction entry is ~420 bytes:
    /// 512 a chunk. Stored, not computed per access: a generic computation would look the
    /// element's layout up at run time on every slot access.
    @usableFromInline let chunkShift: Int
    @inlinable var chunkMask: Int { (1 << chunkShift) - 1 }
    /// The slots in a chunk.
    @inlinable package var chunkSize: Int { 1 << chunkShift }

    /// The chunk shift for this element type.
    @inlinable static func shift() -> Int {
        let perChunk = max(1, (1 << 18) / MemoryLayout<Element?>.stride)
        return max(6, Int.bitWidth - 1 - perChunk.leadingZeroBitCount)
    }

    @usableFromInline var chunks: [[Element?]] = []
    @usableFromInline var vacant: [UInt32] = []
    @usableFromInline var slotCount = 0
    @usableFromInline var live = 0

    @inlinable package init() { chunkShift = Self.shift() }

    /// The number of occupied slots.
    @inlinable package var count: Int { live }

    /// Stores `element` in a vacant slot (or a new one) and returns the slot.
    @inlinable package mutating func insert(_ element: consuming Element) -> Int {
        live += 1
        if let v = vacant.popLast() {
            let s = Int(v)
            chunks[s >> chunkShift][s & chunkMask] = consume element
            return s
        }
        let s = slotCount
        slotCount += 1
        if s & chunkMask == 0 {
            // A new chunk: its room reserved once, its pages touched only as slots fill.
            var chunk: [Element?] = []
            chunk.reserveCapacity(chunkSize)
            chunks.append(chunk)
        }
        chunks[s >> chunkShift].append(consume element)
        return s
    }

    /// Empties a slot and returns what it held (nil when it was vacant).
    @inlinable @discardableResult package mutating func remove(_ slot: Int) -> Element? {
        guard slot >= 0, slot < slotCount else { return nil }
        guard let e = chunks[slot >> chunkShift][slot & chunkMask].take() else { return nil }
        live -= 1
        vacant.append(UInt32(truncatingIfNeeded: slot))
        return e
    }

    /// The value in a slot, read and changed where it lies (no copy); nil when vacant or out of range.
    @inlinable package subscript(slot: Int) -> Element? {
        get {
            guard slot >= 0, slot < slotCount else { return nil }
            return chunks[slot >> chunkShift][slot & chunkMask]
        }
        _modify {
            precondition(slot >= 0 && slot < slotCount, "SlotTable: slot \(slot) out of range")
            yield &chunks[slot >> chunkShift][slot & chunkMask]
        }
    }

    /// Runs `body` on the value in a slot, where it lies; nil (and `body` not run) when the slot
    /// is vacant.
    @inlinable package mutating func modify<R>(_ slot: Int, _ body: (inout Element) -> R) -> R? {
        guard slot >= 0, slot < slotCount else { return nil }
        let c = slot >> chunkShift, o = slot & chunkMask
        guard chunks[c][o] != nil else { return nil }
        return body(&chunks[c][o]!)
    }

    /// Stores `element` at a slot the caller chose (a table that follows another's slots: the
    /// endpoint's timers follow the transaction layer's), growing to it. A table filled this
    /// way is emptied with ``take(_:)``, never ``remove(_:)``, and never ``insert(_:)``.
    @inlinable package mutating func put(_ element: consuming Element, at slot: Int) {
        precondition(slot >= 0, "SlotTable: negative slot")
        while slotCount <= slot {
            if slotCount & chunkMask == 0 {
                var chunk: [Element?] = []
                chunk.reserveCapacity(chunkSize)
                chunks.append(chunk)
            }
            chunks[slotCount >> chunkShift].append(nil)
            slotCount += 1
        }
        let c = slot >> chunkShift, o = slot & chunkMask
        if chunks[c][o] == nil { live += 1 }
        chunks[c][o] = consume element
    }

    /// Empties a slot of a table filled with ``put(_:at:)`` and returns what it held.
    @inlinable @discardableResult package mutating func take(_ slot: Int) -> Element? {
        guard slot >= 0, slot < slotCount, let e = chunks[slot >> chunkShift][slot & chunkMask].take() else { return nil }
        live -= 1
        return e
    }

    /// The next slot ``insert(_:)`` will use.
    @inlinable package var nextSlot: Int { vacant.last.map { Int($0) } ?? slotCount }
}

extension SlotTable: Sendable where Element: Sendable {}

/// Values in a ``SlotTable`` under ids that name their slot: the slot in an id's low 32 bits, a
/// sequence number in its high 32 (never 0, so no id is 0). A value is found by indexing,
/// without hashing, and an id whose slot has been taken again since (a late timer, a stale
/// handle) does not match. The table behind the transaction layer's transaction ids and the
/// timer service's handles.
@usableFromInline
package struct SlotMap<Element> {
    @usableFromInline var table = SlotTable<Element>()
    /// The id in each slot, 0 when the slot is vacant.
    @usableFromInline var ids: [UInt64] = []
    @usableFromInline var nextSequence: UInt32 = 1

    @inlinable package init() {}

    /// The number of values held.
    @inlinable package var count: Int { table.count }

    /// The slot an id names (whether or not it is still live there).
    @inlinable package static func slot(ofID id: UInt64) -> Int { Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: id)) }

    /// An id for a new value: the slot it will take and the next sequence number. The caller
    /// stores the value with ``store(_:as:)`` before it allocates another id.
    @inlinable package mutating func allocateID() -> UInt64 {
        let seq = nextSequence
        nextSequence = seq == .max ? 1 : seq + 1
        return UInt64(seq) << 32 | UInt64(UInt32(truncatingIfNeeded: table.nextSlot))
    }

    /// Stores a new value under the id ``allocateID()`` gave last.
    @inlinable package mutating func store(_ element: consuming Element, as id: UInt64) {
        let s = table.insert(element)
        precondition(s == Self.slot(ofID: id), "SlotMap: an id was allocated and another value stored first")
        if s == ids.count { ids.append(id) } else { ids[s] = id }
    }

    /// Stores the value `make` builds from its id, and returns the id.
    @inlinable package mutating func insert(_ make: (UInt64) -> Element) -> UInt64 {
        let id = allocateID()
        store(make(id), as: id)
        return id
    }

    /// The slot of `id` when it is live; nil when it was removed (its slot vacant or reused).
    @inlinable package func slot(of id: UInt64) -> Int? {
        let s = Self.slot(ofID: id)
        return id != 0 && s < ids.count && ids[s] == id ? s : nil
    }

    /// Whether `id` is live.
    @inlinable package func contains(_ id: UInt64) -> Bool { slot(of: id) != nil }

    /// The value in a slot (from ``slot(of:)``), read and changed where it lies.
    @inlinable package subscript(slot s: Int) -> Element? {
        get { table[s] }
        _modify { yield &table[s] }
    }

    /// Removes the value under `id` and returns it (nil when `id` is not live).
    @inlinable @discardableResult package mutating func remove(_ id: UInt64) -> Element? {
        guard let s = slot(of: id) else { return nil }
        ids[s] = 0
        return table.remove(s)
    }
}

extension SlotMap: Sendable where Element: Sendable {}
