import SIPTransaction

/// The deadlines of a ``TimerService``: a first-in, first-out lane per delay in use, and a heap
/// for the rest.
///
/// Timers armed with the same delay fall due in the order they were armed (the clock only goes
/// forward), so each delay's timers need no ordering at all: a lane is a queue, and arming or
/// firing a timer on one is O(1). The runtime arms a few delays only (64·T1 for Timers J, L, B,
/// F, H and M; T4; T1 and its doublings; the 100 Trying delay), so nearly every timer goes to a
/// lane; the heap takes delays beyond ``maxLanes`` (and a deadline earlier than its lane's last,
/// which a monotonic clock never gives). A busy server keeps a hundred thousand lingering
/// transactions' timers: in a heap, each arm and each firing walked its 17 levels through
/// memory that no longer fits a cache.
///
/// Items are compared by deadline, then by id: the service's ids grow in the order timers are
/// armed, so timers due at the same time fire in that order, as they did from the heap alone.
struct TimerQueue {
    struct Item {
        var deadline: Duration
        var id: UInt64
    }

    /// The timers armed with one delay, in the order they were armed.
    struct Lane {
        let delay: Duration
        var items: [Item] = []
        /// The first item still queued (items before it have been taken).
        var head = 0

        init(delay: Duration) { self.delay = delay }

        var first: Item? { head < items.count ? items[head] : nil }

        mutating func removeFirst() {
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= items.count {
                // Taken items are dropped in one move once they are half of the array.
                items.removeFirst(head)
                head = 0
            }
        }
    }

    /// How many delays get a lane; timers with other delays go to the heap.
    static let maxLanes = 8

    private(set) var lanes: [Lane] = []
    private var heap = DeadlineHeap<UInt64>()
    /// The earliest deadline as pushes left it (nil: none queued), while ``earliestKnown``:
    /// a push compares with it instead of looking at every lane and the heap; a pop forgets it.
    private var knownEarliest: Duration?
    private var earliestKnown = false

    var isEmpty: Bool { heap.isEmpty && lanes.allSatisfy { $0.first == nil } }

    /// The earliest item and where it is (a lane's index, or -1 for the heap).
    private func earliest() -> (item: Item, source: Int)? {
        var best: (item: Item, source: Int)?
        if let d = heap.nextDeadline, let id = heap.firstItem { best = (Item(deadline: d, id: id), -1) }
        for k in lanes.indices {
            guard let f = lanes[k].first else { continue }
            if let b = best, b.item.deadline < f.deadline || (b.item.deadline == f.deadline && b.item.id < f.id) { continue }
            best = (f, k)
        }
        return best
    }

    /// The earliest deadline.
    var nextDeadline: Duration? { earliest()?.item.deadline }

    /// The id of the earliest timer.
    var firstItem: UInt64? { earliest()?.item.id }

    /// Adds timer `id`, armed with `delay`, due at `deadline`; returns whether it became the
    /// earliest.
    mutating func push(_ id: UInt64, at deadline: Duration, delay: Duration) -> Bool {
        let before = earliestKnown ? knownEarliest : nextDeadline
        let item = Item(deadline: deadline, id: id)
        if let k = lanes.firstIndex(where: { $0.delay == delay }) {
            if let last = lanes[k].items.last, last.deadline > deadline {
                heap.push(id, at: deadline)
            } else {
                lanes[k].items.append(item)
            }
        } else if lanes.count < Self.maxLanes {
            var lane = Lane(delay: delay)
            lane.items.append(item)
            lanes.append(lane)
        } else {
            heap.push(id, at: deadline)
        }
        let first = before.map { deadline < $0 } ?? true
        knownEarliest = first ? deadline : before
        earliestKnown = true
        return first
    }

    /// Removes and returns the earliest timer's id, whatever its deadline.
    mutating func popFirst() -> UInt64? {
        guard let (item, source) = earliest() else { return nil }
        earliestKnown = false
        if source < 0 { _ = heap.popFirst() } else { lanes[source].removeFirst() }
        return item.id
    }

    /// Removes and returns the earliest timer's id when it is due by `limit`.
    mutating func pop(dueBy limit: Duration) -> UInt64? {
        guard let (item, source) = earliest(), item.deadline <= limit else { return nil }
        earliestKnown = false
        if source < 0 { _ = heap.popFirst() } else { lanes[source].removeFirst() }
        return item.id
    }

    mutating func removeAll() {
        lanes.removeAll()
        heap.removeAll()
        earliestKnown = false
    }
}
