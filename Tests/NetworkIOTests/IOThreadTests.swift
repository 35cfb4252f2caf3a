import Synchronization
import Testing
@testable import NetworkIO

@Suite("IOThread")
struct IOThreadTests {
    @Test func runsItsBodyAndJoins() throws {
        let ran = Atomic<Int>(0)
        let onItself = Atomic<Bool>(false)
        let box = Mutex<IOThread?>(nil)
        let thread = try IOThread(name: "test-io-thread") {
            // isCurrent holds from the thread's first instruction, before the creator stored the id.
            onItself.store(box.withLock { $0?.isCurrent } ?? true, ordering: .sequentiallyConsistent)
            ran.add(1, ordering: .sequentiallyConsistent)
        }
        box.withLock { $0 = thread }
        #expect(!thread.isCurrent)
        thread.join()
        let (runs, sawItself) = (ran.load(ordering: .sequentiallyConsistent), onItself.load(ordering: .sequentiallyConsistent))
        #expect(runs == 1)
        #expect(sawItself)
        // Joining again does nothing.
        thread.join()
        #expect(!thread.isRealtime)
    }

    @Test func joiningFromItselfDoesNotWait() throws {
        let box = Mutex<IOThread?>(nil)
        let ready = Atomic<Bool>(false)
        let done = Atomic<Bool>(false)
        let thread = try IOThread(name: "test-self-join") {
            while !ready.load(ordering: .sequentiallyConsistent) {}
            box.withLock { $0 }?.join()
            done.store(true, ordering: .sequentiallyConsistent)
        }
        box.withLock { $0 = thread }
        ready.store(true, ordering: .sequentiallyConsistent)
        while !done.load(ordering: .sequentiallyConsistent) {}
        // The thread detached itself; a later join from here returns at once.
        thread.join()
    }

    @Test func realtimeIsRequestedOnlyWhenAsked() throws {
        // Whether SCHED_FIFO is granted depends on the process's privileges; either way the body runs.
        let ran = Atomic<Bool>(false)
        let thread = try IOThread(name: "test-rt", realtimePriority: 500) { ran.store(true, ordering: .sequentiallyConsistent) }
        thread.join()
        let didRun = ran.load(ordering: .sequentiallyConsistent)
        #expect(didRun)
    }
}
