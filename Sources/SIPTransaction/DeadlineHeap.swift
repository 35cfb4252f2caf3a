/// A binary min-heap of items keyed by a deadline and, for equal deadlines, by insertion
/// order: the timer queue of every driver of the transaction layer (wall-clock timer thread,
/// simulation event loop).
///
/// Inlinable, so each driver gets a copy specialized for its item type: the timer thread's
/// heap moves plain integers, never a generic value through witness tables.
public struct DeadlineHeap<Item> {
    @usableFromInline
    struct Entry {
        @usableFromInline var deadline: Duration
        @usableFromInline var sequence: UInt64
        @usableFromInline var item: Item
        @inlinable init(deadline: Duration, sequence: UInt64, item: Item) {
            self.deadline = deadline
            self.sequence = sequence
            self.item = item
        }
        @inlinable func before(_ o: Entry) -> Bool { deadline < o.deadline || (deadline == o.deadline && sequence < o.sequence) }
    }

    @usableFromInline var heap: [Entry] = []
    @usableFromInline var sequence: UInt64 = 0

    @inlinable public init() {}

    @inlinable public var count: Int { heap.count }
    @inlinable public var isEmpty: Bool { heap.isEmpty }
    /// The earliest deadline.
    @inlinable public var nextDeadline: Duration? { heap.first?.deadline }

    /// Adds an item; returns whether it became the earliest.
    @discardableResult @inlinable
    public mutating func push(_ item: Item, at deadline: Duration) -> Bool {
        sequence &+= 1
        heap.append(Entry(deadline: deadline, sequence: sequence, item: item))
        var i = heap.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            guard heap[i].before(heap[p]) else { break }
            heap.swapAt(i, p)
            i = p
        }
        return i == 0
    }

    /// The earliest item.
    @inlinable public var firstItem: Item? { heap.first?.item }

    /// Removes and returns the earliest item when its deadline is at or before `limit`.
    @inlinable public mutating func pop(dueBy limit: Duration) -> (deadline: Duration, item: Item)? {
        guard let first = heap.first, first.deadline <= limit else { return nil }
        return popFirst()
    }

    /// Removes and returns the earliest item, whatever its deadline.
    @inlinable public mutating func popFirst() -> (deadline: Duration, item: Item)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count, heap[l].before(heap[m]) { m = l }
            if r < heap.count, heap[r].before(heap[m]) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return (top.deadline, top.item)
    }

    @inlinable public mutating func removeAll() { heap.removeAll() }
}

extension DeadlineHeap: Sendable where Item: Sendable {}
extension DeadlineHeap.Entry: Sendable where Item: Sendable {}
