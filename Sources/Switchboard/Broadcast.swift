import Synchronization

/// The subscribers of a ``Broadcast`` or an ``EventFanOut``: one continuation each, removed when
/// its consumer stops; once finished, new subscribers are finished at once. A broadcast's
/// current value is kept here too, under the same lock (one object, one lock per broadcast).
private final class Subscribers<Value: Sendable>: Sendable {
    private struct State {
        var all: [Int: AsyncStream<Value>.Continuation] = [:]
        var finished = false
        /// A broadcast's current value (nil for a fan-out).
        var current: Value?
    }

    private let state: Mutex<State>
    private let ids = Atomic<Int>(0)

    init(current: Value? = nil) {
        state = Mutex(State(current: current))
    }

    /// The current value (a broadcast's).
    var current: Value? { state.withLock { $0.current } }

    /// A new stream; the current value, if any, is yielded first, under the lock (in order with
    /// later publications), also when already finished.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        // The handler is set outside the lock (it may run at once, and it takes the lock).
        let id = ids.add(1, ordering: .relaxed).oldValue
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.all.removeValue(forKey: id) }
        }
        let finished = state.withLock { s -> Bool in
            if let v = s.current { continuation.yield(v) }
            guard !s.finished else { return true }
            s.all[id] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Yields `value` to every subscriber, unless finished (with `keep`, it becomes the current
    /// value first); with `final`, finishes them all after it.
    func publish(_ value: Value, final: Bool = false, keep: Bool = false) {
        let ending = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            guard !s.finished else { return [] }
            if keep { s.current = value }
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
