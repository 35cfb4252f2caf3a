import Logging
import ServiceLifecycle
import SIPMessage
import Switchboard
import Synchronization

/// The phone's calls as the web API shows them, and their events as server-sent events (one
/// JSON object each) for every `GET /events` listener. A `Service`: it rings and follows incoming
/// calls while the group runs, and at shutdown ends the listeners' streams.
final class CallCenter: Service, Sendable {
    let phone: Phone
    private let logger: Logger
    private let book = Mutex(Book())

    /// Calls kept for `GET /calls`, ended ones included, at most this many.
    static let keptCalls = 100
    /// Frames buffered for a listener that reads slowly; older ones are dropped.
    static let listenerBuffer = 256
    /// How often listeners get a heartbeat comment.
    private let heartbeat: Duration

    private struct Book {
        var calls: [UInt64: Call] = [:]
        var digits: [UInt64: String] = [:]
        var listeners: [Int: AsyncStream<String>.Continuation] = [:]
        var nextListener = 0
        var closed = false
    }

    init(phone: Phone, heartbeat: Duration = .seconds(15), logger: Logger) {
        self.phone = phone
        self.heartbeat = heartbeat
        self.logger = logger
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.ringIncomingCalls() }
                group.addTask { await self.sendHeartbeats() }
            }
        }
        let listeners = book.withLock { book in
            book.closed = true
            let all = Array(book.listeners.values)
            book.listeners = [:]
            return all
        }
        for listener in listeners { listener.finish() }
    }

    private func ringIncomingCalls() async {
        for await call in phone.incomingCallStream {
            logger.info("incoming call \(call.id) from \(call.remote.map { "\($0)" } ?? "?")")
            track(call)
            // Ring: a 180 tells the caller we alert; the call waits for POST /calls/{id}/answer.
            try? await call.ring()
        }
    }

    /// A comment line now and then keeps idle connections open through proxies, and finds the
    /// listeners whose browser went away (the write fails, the stream ends).
    private func sendHeartbeats() async {
        while (try? await Task.sleep(for: heartbeat)) != nil {
            send(": heartbeat\n\n")
        }
    }

    // MARK: Calls

    /// Places a call and follows it.
    func dial(_ target: SIPURI) async -> Call {
        let call = await phone.dial(target)
        logger.info("call \(call.id) to \(target)")
        track(call)
        return call
    }

    func call(_ id: UInt64) -> Call? { book.withLock { $0.calls[id] } }

    func summaries() -> [CallSummary] {
        let (calls, digits) = book.withLock { ($0.calls.values.sorted { $0.id < $1.id }, $0.digits) }
        return calls.map { CallSummary($0, digits: digits[$0.id] ?? "") }
    }

    func summary(_ call: Call) -> CallSummary {
        CallSummary(call, digits: book.withLock { $0.digits[call.id] } ?? "")
    }

    /// Keeps the call and publishes its state now, then every event until it ends.
    private func track(_ call: Call) {
        let isNew = book.withLock { book in
            guard book.calls[call.id] == nil else { return false }
            book.calls[call.id] = call
            if book.calls.count > Self.keptCalls {
                for old in book.calls.values.filter({ $0.state.isEnded }).sorted(by: { $0.id < $1.id })
                    .prefix(book.calls.count - Self.keptCalls) {
                    book.calls[old.id] = nil
                    book.digits[old.id] = nil
                }
            }
            return true
        }
        guard isNew else { return }
        // Subscribed before the current state is read, so no change falls in between; a state
        // seen twice that way is published once (a call never repeats a state).
        let events = call.events
        let current = call.state
        publish(EventLine(call, event: "state", state: current))
        Task { [self] in
            var last = current
            for await event in events {
                switch event {
                case .state(let state):
                    guard state != last else { continue }
                    last = state
                    publish(EventLine(call, event: "state", state: state))
                case .digit(let digit, let transport):
                    book.withLock { $0.digits[call.id, default: ""].append(digit) }
                    publish(EventLine(call, event: "digit", detail: "\(digit) (\(transport))"))
                case .mediaActive(let active):
                    publish(EventLine(call, event: "media", detail: active ? "started" : "stopped"))
                case .quality(let quality):
                    publish(EventLine(call, event: "quality", detail: "\(quality)"))
                case .data(let data):
                    publish(EventLine(call, event: "data", detail: "\(data)"))
                case .transferRequested(let request, let accepted):
                    publish(EventLine(call, event: "transfer", detail: "to \(request.target) \(accepted ? "accepted" : "declined")"))
                case .transferProgress(let status):
                    publish(EventLine(call, event: "transfer", detail: "\(status)"))
                case .transferResult(let outcome):
                    publish(EventLine(call, event: "transfer", detail: "\(outcome)"))
                }
            }
        }
    }

    // MARK: Listeners

    /// The events from now on as server-sent-event frames (`data: {…}` and a blank line, or a
    /// heartbeat comment); finishes at shutdown.
    func subscribe() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(Self.listenerBuffer))
        let id: Int? = book.withLock { book in
            guard !book.closed else { return nil }
            book.nextListener += 1
            book.listeners[book.nextListener] = continuation
            return book.nextListener
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.book.withLock { _ = $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    private func publish(_ line: EventLine) {
        let json = line.json()
        logger.debug("event \(json)")
        send("data: \(json)\n\n")
    }

    private func send(_ frame: String) {
        // Yielded outside the lock: a finishing stream's onTermination takes it.
        let listeners = book.withLock { Array($0.listeners.values) }
        for listener in listeners { listener.yield(frame) }
    }
}
