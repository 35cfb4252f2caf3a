import Synchronization
import Testing
@testable import NetworkIO
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("InlineSerialQueue")
struct InlineSerialQueueTests {
    @Test func runsOnTheSubmittingThreadWhenIdle() {
        let queue = InlineSerialQueue()
        let me = pthread_self()
        let ranHere = Mutex<Bool?>(nil)
        queue.async { ranHere.withLock { $0 = pthread_equal(pthread_self(), me) != 0 } }
        // Inline: done before async returns.
        #expect(ranHere.withLock { $0 } == true)
    }

    @Test func workSubmittedFromAnItemRunsAfterIt() {
        let queue = InlineSerialQueue()
        let log = Mutex<[String]>([])
        queue.async {
            log.withLock { $0.append("a start") }
            queue.async { log.withLock { $0.append("b") } }
            queue.async { log.withLock { $0.append("c") } }
            log.withLock { $0.append("a end") }
        }
        #expect(log.withLock { $0 } == ["a start", "a end", "b", "c"])
    }

    @Test func itemsNeverOverlapAndKeepEachSubmittersOrder() throws {
        let queue = InlineSerialQueue()
        let inFlight = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let seen = Mutex<[[Int]]>(Array(repeating: [], count: 4))
        let perThread = 2_000
        var threads: [IOThread] = []
        for t in 0..<4 {
            threads.append(try IOThread(name: "isq-\(t)") {
                for i in 0..<perThread {
                    queue.async {
                        if inFlight.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlaps.add(1, ordering: .sequentiallyConsistent) }
                        seen.withLock { $0[t].append(i) }
                        inFlight.subtract(1, ordering: .sequentiallyConsistent)
                    }
                }
            })
        }
        for t in threads { t.join() }
        // Whoever drains last has run everything before its async returned.
        let all = seen.withLock { $0 }
        #expect(overlaps.load(ordering: .sequentiallyConsistent) == 0)
        for t in 0..<4 { #expect(all[t] == Array(0..<perThread)) }
    }

    @Test func syncReturnsTheValue() {
        let queue = InlineSerialQueue()
        let order = Mutex<[Int]>([])
        queue.async { order.withLock { $0.append(1) } }
        let v = queue.sync { order.withLock { $0.append(2) }; return 42 }
        #expect(v == 42)
        #expect(order.withLock { $0 } == [1, 2])
    }
}
