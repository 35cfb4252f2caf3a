import Synchronization
import Testing
import SIPMessage
import SIPDialog
@testable import SIPRuntime

/// The owner's synchronous path (`SIPUserAgent.setEventHandler`): events handed to a handler on
/// the agent's queue, commands run there, and the events the handler leaves to the stream.
/// Between two agents on 127.0.0.1; bob has the handler, alice is the caller.
@Suite("SIPUserAgent: the owner's event handler on the agent's queue")
struct EventHandlerTests {
    /// One handled event: where it was handled and what it was.
    struct Entry: Sendable, Equatable {
        var viaStream: Bool
        var what: String
    }

    static func describe(_ e: SIPUserAgent.Event) -> String {
        switch e {
        case .incomingCall: return "incoming call"
        case .session(_, .stateChanged(let s)): return "state \(s)"
        case .session(_, let ev): return "session \(ev)"
        default: return "other"
        }
    }

    /// Waits (bounded) until `condition` holds.
    static func wait(_ what: String, _ condition: () -> Bool) async {
        for _ in 0..<1000 {
            if condition() { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("timed out waiting for \(what)")
    }

    @Test("a command the handler runs on the queue raises events handed to it after it returns; the stream gets nothing", .timeLimit(.minutes(1)))
    func commandsOnTheQueue() async throws {
        let alice = try UserAgentLoopbackTests.agent("alice"), bob = try UserAgentLoopbackTests.agent("bob")
        defer { alice.close(); bob.close() }
        let aliceEvents = AgentEvents(alice)
        let log = Mutex<[String]>([])
        let depth = Mutex((now: 0, deepest: 0))
        bob.setEventHandler { e in
            depth.withLock { d in
                d.now += 1
                d.deepest = max(d.deepest, d.now)
            }
            defer { depth.withLock { $0.now -= 1 } }
            log.withLock { $0.append(Self.describe(e)) }
            if case .incomingCall(let key, _) = e {
                try? bob.performOnQueue(key) { s throws(SessionError) in try s.accept(body: UserAgentLoopbackTests.answer) }
                log.withLock { $0.append("accepted") }
            }
            return true
        }
        let streamed = Mutex(0)
        let reader = Task { for await _ in bob.events { streamed.withLock { $0 += 1 } } }
        let key = await alice.call(try UserAgentLoopbackTests.uri(of: bob, "bob"), offer: UserAgentLoopbackTests.offer)
        await aliceEvents.wait("alice confirmed", aliceEvents.has(key, .confirmed))
        await Self.wait("bob confirmed") { log.withLock { $0.contains("state \(SessionState.confirmed)") } }
        try await alice.perform(key) { s throws(SessionError) in try s.bye() }
        await Self.wait("bob's call ended") { log.withLock { $0.contains { $0.hasPrefix("state terminated") } } }
        bob.close()
        await reader.value

        let entries = log.withLock { $0 }
        let incoming = try #require(entries.firstIndex(of: "incoming call"))
        #expect(entries[incoming + 1] == "accepted", "the accept's events come after the handler returned: \(entries)")
        #expect(entries[(incoming + 2)...].contains { $0.hasPrefix("state ") }, "\(entries)")
        #expect(depth.withLock { $0.deepest } == 1, "the handler never runs inside itself")
        #expect(streamed.withLock { $0 } == 0, "every event went to the handler")
    }

    @Test("an event the handler leaves goes to the stream, and the events after it follow there until the owner caught up", .timeLimit(.minutes(1)))
    func leftToTheStream() async throws {
        let alice = try UserAgentLoopbackTests.agent("alice"), bob = try UserAgentLoopbackTests.agent("bob")
        defer { alice.close(); bob.close() }
        let aliceEvents = AgentEvents(alice)
        let log = Mutex<[Entry]>([])
        bob.setEventHandler { e in
            // The new call waits for the application (as a screened call would): not here.
            if case .incomingCall = e { return false }
            log.withLock { $0.append(Entry(viaStream: false, what: Self.describe(e))) }
            return true
        }
        let pending = Mutex(0)
        let reader = Task {
            for await e in bob.events {
                log.withLock { $0.append(Entry(viaStream: true, what: Self.describe(e))) }
                pending.withLock { $0 += 1 }
                if case .incomingCall(let key, _) = e {
                    try? await bob.perform(key) { s throws(SessionError) in try s.accept(body: UserAgentLoopbackTests.answer) }
                }
                bob.eventConsumed()
                pending.withLock { $0 -= 1 }
            }
        }
        let key = await alice.call(try UserAgentLoopbackTests.uri(of: bob, "bob"), offer: UserAgentLoopbackTests.offer)
        await aliceEvents.wait("alice confirmed", aliceEvents.has(key, .confirmed))
        let confirmed = "state \(SessionState.confirmed)"
        await Self.wait("bob confirmed, its stream read") {
            log.withLock { $0.contains { $0.what == confirmed } } && pending.withLock { $0 == 0 }
        }
        try await alice.perform(key) { s throws(SessionError) in try s.bye() }
        await Self.wait("bob's call ended") { log.withLock { $0.contains { $0.what.hasPrefix("state terminated") } } }
        bob.close()
        await reader.value

        let entries = log.withLock { $0 }
        let first = try #require(entries.firstIndex { $0.viaStream })
        let last = try #require(entries.lastIndex { $0.viaStream })
        #expect(entries[first].what == "incoming call", "\(entries)")
        #expect(!entries.contains { !$0.viaStream && $0.what == "incoming call" })
        #expect(last > first, "the accept's events, raised while the call was left to the stream, went there too: \(entries)")
        #expect(entries[first...last].allSatisfy { $0.viaStream }, "no event overtook those in the stream: \(entries)")
        let ended = try #require(entries.firstIndex { $0.what.hasPrefix("state terminated") })
        #expect(!entries[ended].viaStream, "once the owner caught up, events go to the handler again")
        let states = entries.map(\.what).filter { $0.hasPrefix("state ") }
        #expect(states.firstIndex(of: confirmed).map { $0 < states.count - 1 } == true, "confirmed before the end: \(states)")
    }
}
