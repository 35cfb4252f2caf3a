import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// RFC 3891 §6 at the transfer target, between our own phones on 127.0.0.1: alice calls carol;
/// an INVITE naming that call in its Replaces comes from someone, and carol's default (or her
/// application) decides.
@Suite("Phone: Replaces authorization (RFC 3891 §6)")
struct ReplacesAuthorizationLiveTests {
    typealias T = TransferTests

    static func phone(_ user: String, lines: T.Lines,
                      authorize: (@Sendable (SIPMessage, SessionKey, ReplacesAuthorization.Grounds?) -> Bool)? = nil) throws -> Phone {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: T.fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.sessionTimer = nil
        if let authorize {
            return try Phone(name: user, configuration: c, autoAnswer: .milliseconds(20), authorizeReplaces: authorize, report: { lines.add($0) })
        }
        return try Phone(name: user, configuration: c, autoAnswer: .milliseconds(20), report: { lines.add($0) })
    }

    /// Alice's call to carol, up; the Replaces header naming it as carol holds it.
    static func aliceCallsCarol(_ alice: Phone, _ carol: Phone) async throws -> (SessionKey, Replaces) {
        let ac = await alice.call(try T.uri(carol, "carol"))
        #expect(await T.up(alice, ac))
        let remote = try #require(await alice.agent.session(ac)?.dialog?.id.remoteTag)
        return (ac, ReferRequest.replaces(forConsultation: ac, remoteTag: remote))
    }

    @Test("a stranger's INVITE with a matching Replaces and no Referred-By: 403, carol keeps alice's call")
    func strangerRefused() async throws {
        let lines = T.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines)
        let mallory = try Self.phone("mallory", lines: lines)
        defer { alice.close(); carol.close(); mallory.close() }
        let (ac, replaces) = try await Self.aliceCallsCarol(alice, carol)
        let mc = await mallory.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description)])
        #expect(await mallory.wait(mc, timeout: .seconds(5)) { $0 == .terminated(.rejected(403)) }, "lines: \(lines.text)")
        #expect(lines.contains("carol: Replaces not authorized (RFC 3891 §6)"))
        #expect(lines.contains("carol: Replaces refused with 403"))
        #expect(alice.states(ac).last == .confirmed, "the call is not taken over")
    }

    @Test("Referred-By naming someone other than alice: 403")
    func referredByOtherRefused() async throws {
        let lines = T.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines)
        let mallory = try Self.phone("mallory", lines: lines)
        defer { alice.close(); carol.close(); mallory.close() }
        let (ac, replaces) = try await Self.aliceCallsCarol(alice, carol)
        let mc = await mallory.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description), (.referredBy, "<sip:eve@127.0.0.1>")])
        #expect(await mallory.wait(mc, timeout: .seconds(5)) { $0 == .terminated(.rejected(403)) }, "lines: \(lines.text)")
        #expect(alice.states(ac).last == .confirmed)
    }

    @Test("Referred-By naming alice (an attended transfer's INVITE): carol's call is replaced")
    func referredByPeerAccepted() async throws {
        let lines = T.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines), bob = try Self.phone("bob", lines: lines)
        defer { alice.close(); carol.close(); bob.close() }
        let (ac, replaces) = try await Self.aliceCallsCarol(alice, carol)
        let bc = await bob.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description), (.referredBy, "<sip:alice@127.0.0.1>")])
        #expect(await bob.wait(bc, timeout: .seconds(5)) { $0 == .confirmed }, "lines: \(lines.text)")
        #expect(await alice.wait(ac, timeout: .seconds(5)) { $0 == .terminated(.remoteHangup) })
        #expect(lines.contains("carol: call replaces \(ac.callID) (Referred-By sip:alice@127.0.0.1)"))
    }

    @Test("From alice herself (another device of hers), no Referred-By: carol's call is replaced")
    func fromPeerAccepted() async throws {
        let lines = T.Lines()
        let alice = try Self.phone("alice", lines: lines), carol = try Self.phone("carol", lines: lines)
        let alice2 = try Self.phone("alice", lines: lines)
        defer { alice.close(); carol.close(); alice2.close() }
        let (ac, replaces) = try await Self.aliceCallsCarol(alice, carol)
        let moved = await alice2.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description)])
        #expect(await alice2.wait(moved, timeout: .seconds(5)) { $0 == .confirmed }, "lines: \(lines.text)")
        #expect(await alice.wait(ac, timeout: .seconds(5)) { $0 == .terminated(.remoteHangup) })
    }

    @Test("the application decides: its hook sees the default's grounds, may refuse an authorized one and grant a stranger")
    func applicationHook() async throws {
        let lines = T.Lines()
        let seen = Mutex<[ReplacesAuthorization.Grounds?]>([])
        // Carol grants exactly what the default refuses.
        let carol = try Self.phone("carol", lines: lines) { _, _, grounds in seen.withLock { $0.append(grounds) }; return grounds == nil }
        let alice = try Self.phone("alice", lines: lines), bob = try Self.phone("bob", lines: lines), mallory = try Self.phone("mallory", lines: lines)
        defer { alice.close(); carol.close(); bob.close(); mallory.close() }
        let (ac, replaces) = try await Self.aliceCallsCarol(alice, carol)
        let bc = await bob.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description), (.referredBy, "<sip:alice@127.0.0.1>")])
        #expect(await bob.wait(bc, timeout: .seconds(5)) { $0 == .terminated(.rejected(403)) }, "lines: \(lines.text)")
        #expect(alice.states(ac).last == .confirmed)
        let mc = await mallory.call(try T.uri(carol, "carol"), headers: [(.replaces, replaces.description)])
        #expect(await mallory.wait(mc, timeout: .seconds(5)) { $0 == .confirmed }, "lines: \(lines.text)")
        #expect(await alice.wait(ac, timeout: .seconds(5)) { $0 == .terminated(.remoteHangup) })
        #expect(seen.withLock { $0 } == [.referredByPeer, nil])
    }
}
