import Synchronization

/// The subscribers of a ``Broadcast`` or an ``EventFanOut``: one continuation each, removed when
/// its consumer stops; once finished, new subscribers are finished at once. A broadcast's
/// current value is kept here too, under the same lock (one object, one lock per broadcast).
///
/// The lock guards no value of its own: the fields it guards are the object's, each of a type
/// whose layout does not depend on `Value` (a dictionary, an array, a flag). A lock around a
/// state generic over `Value` made every instance's destruction look up the runtime metadata
/// of three generic types (a call's two instances: ~2.7k instructions per call).
private final class Subscribers<Value: Sendable>: @unchecked Sendable {
    private let lock = Mutex(())
    /// Under `lock` (checked by it, not by the runtime).
    @exclusivity(unchecked) private var all: [Int: AsyncStream<Value>.Continuation] = [:]
    @exclusivity(unchecked) private var finished = false
    /// A broadcast's current value, its one element (empty for a fan-out).
    @exclusivity(unchecked) private var value: [Value]
    private let ids = Atomic<Int>(0)

    init(current: Value? = nil) {
        value = current.map { [$0] } ?? []
    }

    /// The current value (a broadcast's).
    var current: Value? { lock.withLock { _ in value.first } }

    /// A new stream; the current value, if any, is yielded first, under the lock (in order with
    /// later publications), also when already finished.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        // The handler is set outside the lock (it may run at once, and it takes the lock).
        let id = ids.add(1, ordering: .relaxed).oldValue
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.withLock { _ in _ = self.all.removeValue(forKey: id) }
        }
        let finished = lock.withLock { _ -> Bool in
            if let v = value.first { continuation.yield(v) }
            guard !self.finished else { return true }
            all[id] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Yields `value` to every subscriber, unless finished (with `keep`, it becomes the current
    /// value first); with `final`, finishes them all after it.
    func publish(_ new: Value, final: Bool = false, keep: Bool = false) {
        let ending = lock.withLock { _ -> [AsyncStream<Value>.Continuation] in
            guard !finished else { return [] }
            // In place (a broadcast has its element from the start: no array made per value).
            if keep { if value.isEmpty { value = [new] } else { value[0] = new } }
            for c in all.values { c.yield(new) }
            guard final else { return [] }
            finished = true
            defer { all = [:] }
            return Array(all.values)
        }
        // Finished outside the lock: finishing runs onTermination, which takes it.
        for c in ending { c.finish() }
    }

    func finish() {
        let ending = lock.withLock { _ -> [AsyncStream<Value>.Continuation] in
            finished = true
            defer { all = [:] }
            return Array(all.values)
        }
        for c in ending { c.finish() }
    }
}

/// A value that changes over time, watched by any number of subscribers: each subscriber gets
/// its own `AsyncStream`, which yields the current value first and then every change in order,
/// and finishes after the final value (an ended call). What `Call.states` is made of. A value
/// around one shared object (copies share it).
struct Broadcast<Value: Sendable>: Sendable {
    private let subscribers: Subscribers<Value>

    init(_ initial: Value) {
        subscribers = Subscribers(current: initial)
    }

    var current: Value { subscribers.current! }

    /// A new stream: the current value, then every change; finished after the final value.
    func subscribe() -> AsyncStream<Value> {
        subscribers.subscribe()
    }

    /// Publishes a new value; `final` finishes every stream after it (later values are ignored).
    func publish(_ new: Value, final: Bool = false) {
        subscribers.publish(new, final: final, keep: true)
    }
}

/// Events for any number of subscribers, without a current value: each subscriber sees what is
/// published after it subscribed (e.g. `Phone.incomingCallStream`). A value around one shared
/// object (copies share it).
struct EventFanOut<Value: Sendable>: Sendable {
    private let subscribers = Subscribers<Value>()

    func subscribe() -> AsyncStream<Value> { subscribers.subscribe() }
    func publish(_ value: Value) { subscribers.publish(value) }
    func finish() { subscribers.finish() }
}

/// The value `body` produces within `timeout`, or nil (the body is cancelled then).
func within<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
