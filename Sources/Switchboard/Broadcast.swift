import Synchronization

/// A value that changes over time, watched by any number of subscribers: each subscriber gets
/// its own `AsyncStream`, which yields the current value first and then every change in order,
/// and finishes after the final value (an ended call). What `Call.states` is made of.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var current: Value
        var finished = false
        var subscribers: [Int: AsyncStream<Value>.Continuation] = [:]
    }

    private let state: Mutex<State>
    private let ids = Atomic<Int>(0)

    init(_ initial: Value) {
        state = Mutex(State(current: initial))
    }

    var current: Value { state.withLock { $0.current } }

    /// A new stream: the current value, then every change; finished after the final value.
    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        // The handler is set outside the lock (it may run at once, and it takes the lock).
        let id = ids.add(1, ordering: .relaxed).oldValue
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        let finished = state.withLock { s -> Bool in
            continuation.yield(s.current)
            guard !s.finished else { return true }
            s.subscribers[id] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Publishes a new value; `final` finishes every stream after it (later values are ignored).
    func publish(_ value: Value, final: Bool = false) {
        let ending = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            guard !s.finished else { return [] }
            s.current = value
            // Yielded under the lock: two publishers never reorder a subscriber's values.
            for c in s.subscribers.values { c.yield(value) }
            guard final else { return [] }
            s.finished = true
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        // Finished outside the lock: finishing runs onTermination, which takes it.
        for c in ending { c.finish() }
    }
}

/// Events for any number of subscribers, without a current value: each subscriber sees what is
/// published after it subscribed (e.g. `Phone.incomingCallStream`).
final class EventFanOut<Value: Sendable>: Sendable {
    private let subscribers = Mutex<(all: [Int: AsyncStream<Value>.Continuation], finished: Bool)>(([:], false))
    private let ids = Atomic<Int>(0)

    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = ids.add(1, ordering: .relaxed).oldValue
        continuation.onTermination = { [weak self] _ in
            self?.subscribers.withLock { _ = $0.all.removeValue(forKey: id) }
        }
        let finished = subscribers.withLock { s -> Bool in
            guard !s.finished else { return true }
            s.all[id] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    func publish(_ value: Value) {
        subscribers.withLock { s in for c in s.all.values { c.yield(value) } }
    }

    func finish() {
        let all = subscribers.withLock { s -> [AsyncStream<Value>.Continuation] in
            s.finished = true
            defer { s.all = [:] }
            return Array(s.all.values)
        }
        for c in all { c.finish() }
    }
}
