import Testing
import Synchronization
import SIPMessage
import SIPDialog
import SIPRuntime
import SDP
@testable import Switchboard

/// A phone without media answers the same first offer on every call from one negotiation
/// (``FirstAnswer``): each call's answer must be the one a negotiation of its own would give,
/// under the call's own `o=` session id.
@Suite("Phone: the first answer reissued for the same offer")
struct FirstAnswerTests {
    static let offer = SessionBody.sdp(Array(("v=0\r\no=peer 77 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        + "m=audio 49170 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\n").utf8))

    /// ``offer`` again, putting bob on hold (RFC 3264 §8.4).
    static let holdOffer = SessionBody.sdp(Array(("v=0\r\no=peer 77 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        + "m=audio 49170 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendonly\r\n").utf8))

    /// Calls `bob` from `alice`'s agent with ``offer``: the answer bob sent; with `hold`, also
    /// bob's answer to a hold re-INVITE in the call.
    static func answer(from alice: Phone, to bob: Phone, hold: Bool = false) async throws -> (SessionDescription, held: SessionDescription?) {
        let key = await alice.agent.call(try CallTests.uri(bob, "bob"), offer: offer)
        let up = await alice.wait(timeout: .seconds(5)) { alice.states(key).contains(.confirmed) }
        #expect(up)
        let body = try #require(await alice.agent.session(key)?.remoteBody)
        var held: SessionDescription?
        if hold {
            try await alice.agent.perform(key) { s throws(SessionError) in try s.reinvite(body: holdOffer) }
            for _ in 0..<500 {
                if let b = await alice.agent.session(key)?.remoteBody, b != body {
                    held = try SessionDescription.parse(b.bytes)
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        try await alice.agent.perform(key) { s throws(SessionError) in try s.bye() }
        return (try SessionDescription.parse(body.bytes), held)
    }

    @Test("two calls, one offer: the second answer is the first under its own session id", .timeLimit(.minutes(1)))
    func sameOfferTwice() async throws {
        let alice = try CallTests.phone("alice"), bob = try CallTests.phone("bob", autoAnswer: .zero)
        defer { alice.close(); bob.close() }
        let (first, _) = try await Self.answer(from: alice, to: bob)
        #expect(bob.firstAnswer.withLock { $0 != nil }, "the first answer is kept")
        let (second, held) = try await Self.answer(from: alice, to: bob, hold: true)
        for a in [first, second] {
            #expect(a.origin.sessionVersion == a.origin.sessionID)
            #expect(a.media.first?.formats == ["0", "8", "101"])
        }
        #expect(second.origin.sessionID != first.origin.sessionID)
        var same = second
        same.origin = first.origin
        #expect(same == first)
        // The reissued engine goes on as a negotiated one: the hold is answered recvonly, under
        // the next version of the call's own id.
        let hold = try #require(held)
        #expect(hold.origin.sessionID == second.origin.sessionID)
        #expect(hold.origin.sessionVersion == second.origin.sessionVersion + 1)
        #expect(hold.media.first?.direction == .recvonly)
        // Each reuse draws its own id.
        let (third, _) = try await Self.answer(from: alice, to: bob)
        #expect(third.origin.sessionID != second.origin.sessionID)
    }
}
