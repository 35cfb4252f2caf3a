import Testing
import SIPTransaction
@testable import SIPRuntime

@Suite("TimerQueue: a lane per delay and a heap")
struct TimerQueueTests {
    /// Pops everything, in order.
    static func drain(_ q: inout TimerQueue) -> [UInt64] {
        var out: [UInt64] = []
        while let id = q.popFirst() { out.append(id) }
        return out
    }

    /// Timers of many delays (more than there are lanes), armed at interleaved times, come out
    /// by deadline, and by arming order at equal deadlines, as from a heap alone.
    @Test func itemsComeOutByDeadlineThenID() {
        var q = TimerQueue()
        var expected: [(Duration, UInt64)] = []
        var g = SplitMix64(seed: 7)
        var now = Duration.zero
        for id in UInt64(1)...3000 {
            now += .microseconds(Int64(g.next() % 700))
            let delay = Duration.milliseconds(Int64(g.next() % 12) * 250)   // 12 delays, 8 lanes
            _ = q.push(id, at: now + delay, delay: delay)
            expected.append((now + delay, id))
        }
        #expect(q.lanes.count == TimerQueue.maxLanes)
        expected.sort { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }
        #expect(Self.drain(&q) == expected.map(\.1))
        #expect(q.isEmpty)
    }

    /// A lane's deadlines only grow; one armed earlier than its lane's last (two threads racing
    /// to the lock) goes to the heap and still comes out first.
    @Test func anOutOfOrderDeadlineStillComesOutInOrder() {
        var q = TimerQueue()
        _ = q.push(1, at: .seconds(10), delay: .seconds(5))
        _ = q.push(2, at: .seconds(9), delay: .seconds(5))
        _ = q.push(3, at: .seconds(11), delay: .seconds(5))
        #expect(Self.drain(&q) == [2, 1, 3])
    }

    /// `push` says whether the timer became the earliest (the thread is woken only then), and
    /// `pop(dueBy:)` takes only what is due.
    @Test func pushReportsANewEarliestAndPopTakesOnlyWhatIsDue() {
        var q = TimerQueue()
        let first = [q.push(1, at: .seconds(32), delay: .seconds(32)), q.push(2, at: .seconds(33), delay: .seconds(32)),
                     q.push(3, at: .milliseconds(500), delay: .milliseconds(500)), q.push(4, at: .milliseconds(500), delay: .milliseconds(500))]
        #expect(first == [true, false, true, false])
        #expect(q.nextDeadline == .milliseconds(500))
        let due = [q.pop(dueBy: .milliseconds(499)), q.pop(dueBy: .seconds(1)), q.pop(dueBy: .seconds(1)), q.pop(dueBy: .seconds(1))]
        #expect(due == [nil, 3, 4, nil])
        #expect(q.firstItem == 1)
        // After pops, a push compares with what is left (not with what was taken).
        #expect(q.push(5, at: .seconds(40), delay: .seconds(39)) == false)
        #expect(q.push(6, at: .seconds(10), delay: .seconds(9)) == true)
        #expect(q.push(7, at: .seconds(20), delay: .seconds(19)) == false)
        #expect(q.popFirst() == 6)
        #expect(q.push(8, at: .seconds(21), delay: .seconds(20)) == false)
        #expect(q.push(9, at: .seconds(15), delay: .seconds(14)) == true)
        #expect(Self.drain(&q) == [9, 7, 8, 1, 2, 5])
    }

    /// A long-lived lane drops the items it has given out (it does not grow for ever) and keeps
    /// its order across that.
    @Test func aLaneKeepsItsOrderAsItCompacts() {
        var q = TimerQueue()
        var next: UInt64 = 1, expectNext: UInt64 = 1
        for round in 0..<20 {
            for _ in 0..<1000 {
                _ = q.push(next, at: .milliseconds(Int64(next)), delay: .seconds(32))
                next += 1
            }
            for _ in 0..<(round < 19 ? 900 : 0) {
                let id = q.popFirst()
                #expect(id == expectNext)
                expectNext += 1
            }
        }
        #expect(q.lanes.count == 1)
        #expect(q.lanes[0].items.count - q.lanes[0].head == Int(next - expectNext))
        #expect(q.lanes[0].items.count < 20_000)
        #expect(Self.drain(&q) == Array(expectNext..<next))
    }
}
