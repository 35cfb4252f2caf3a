import Synchronization

/// The subscribers of a ``Broadcast`` or an ``EventFanOut``: one continuation each, removed when
/// its consumer stops; once finished, new subscribers are finished at once.
private final class Subscribers<Value: Sendable>: Sendable {
    private struct State {
        var all: [Int: AsyncStream<Value>.Continuation] = [:]
        var finished = false
    }

    private let state = Mutex(State())
    private let ids = Atomic<Int>(0)

    /// A new stream; `first` runs under the lock before it is registered (to yield a current
    /// value in order with later publications) and also when already finished.
    func subscribe(first: (AsyncStream<Value>.Continuation) -> Void = { _ in }) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        // The handler is set outside the lock (it may run at once, and it takes the lock).
        let id = ids.add(1, ordering: .relaxed).oldValue
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.all.removeValue(forKey: id) }
        }
        let finished = state.withLock { s -> Bool in
            first(continuation)
            guard !s.finished else { return true }
            s.all[id] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Runs `body` under the lock (so publications keep their order), then yields `value` to
    /// every subscriber unless `body` returns false; with `final`, finishes them all after it.
    func publish(_ value: Value, final: Bool = false, _ body: () -> Bool = { true }) {
        let ending = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            guard !s.finished, body() else { return [] }
            for c in s.all.values { c.yield(value) }
            guard final else { return [] }
            s.finished = true
            defer { s.all = [:] }
            return Array(s.all.values)
        }
        // Finished outside the lock: finishing runs onTermination, which takes it.
        for c in ending { c.finish() }
    }

    func finish() {
        let all = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            s.finished = true
            defer { s.all = [:] }
            return Array(s.all.values)
        }
        for c in all { c.finish() }
    }
}

/// A value that changes over time, watched by any number of subscribers: each subscriber gets
/// its own `AsyncStream`, which yields the current value first and then every change in order,
/// and finishes after the final value (an ended call). What `Call.states` is made of.
final class Broadcast<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    private let subscribers = Subscribers<Value>()

    init(_ initial: Value) {
        value = Mutex(initial)
    }

    var current: Value { value.withLock { $0 } }

    /// A new stream: the current value, then every change; finished after the final value.
    func subscribe() -> AsyncStream<Value> {
        subscribers.subscribe { c in c.yield(current) }
    }

    /// Publishes a new value; `final` finishes every stream after it (later values are ignored).
    func publish(_ new: Value, final: Bool = false) {
        subscribers.publish(new, final: final) {
            value.withLock { $0 = new }
            return true
        }
    }
}

/// Events for any number of subscribers, without a current value: each subscriber sees what is
/// published after it subscribed (e.g. `Phone.incomingCallStream`).
final class EventFanOut<Value: Sendable>: Sendable {
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
