import Testing
import Synchronization
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
import SIPRuntime
import NetworkIO
@testable import Switchboard
import SwitchboardTestSupport

/// Out-of-dialog REFER authorized by `Target-Dialog` (RFC 4538) between our own phones on
/// 127.0.0.1: sent, received, refused.
@Suite("Phone: out-of-dialog REFER with Target-Dialog (RFC 4538)")
struct TargetDialogTransferTests {
    typealias T = TransferTests

    /// An out-of-dialog REFER from `from` to `to`'s address with these extra headers; its status.
    static func rawRefer(_ from: Phone, to: SIPURI, referTo: SIPURI, _ extra: [(SIPHeaderName, String)]) async -> SIPMessage? {
        await from.agent.sendRequest(.refer, to: to, headers: [(.referTo, NameAddress(uri: referTo).description)] + extra)
    }

    @Test("blind transfer by a REFER outside the call: 202, NOTIFYs in the new dialog, the new call with Referred-By, the transferor hangs up",
          arguments: [Phone.TargetDialogUse.whenSupported, .always])
    func transfer(_ use: Phone.TargetDialogUse) async throws {
        let lines = T.Lines()
        let alice = try T.phone("alice", lines: lines), bob = try T.phone("bob", lines: lines), carol = try T.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try T.uri(bob, "bob"))
        #expect(await T.up(alice, ab))
        // Our phones list tdialog: whenSupported goes outside the dialog too (with Require: tdialog).
        #expect(await alice.agent.session(ab)?.peerSupportsTargetDialog == true)
        let outcome = await alice.transfer(ab, to: try T.uri(carol, "carol"), targetDialog: use, notifyTimeout: .seconds(5))
        #expect(outcome == .succeeded(200), "lines: \(lines.text)")
        #expect(lines.contains("alice: REFER to sip:carol@127.0.0.1:"), "lines: \(lines.text)")
        #expect(lines.contains("outside the call (Target-Dialog \(ab.callID);local-tag="))
        #expect(lines.contains("bob: out-of-dialog REFER accepted (Target-Dialog: call \(ab.callID))"), "lines: \(lines.text)")
        #expect(lines.contains("alice: transfer progress: SIP/2.0 100 Trying"))
        #expect(lines.contains("alice: transfer progress: SIP/2.0 200 OK"))
        #expect(await alice.wait(ab, timeout: .seconds(5)) { $0 == .terminated(.localHangup) })
        let bc = try #require(carol.incomingCalls.first)
        #expect(await carol.wait(bc, timeout: .seconds(5)) { $0 == .confirmed })
        #expect(lines.contains("carol: incoming call from sip:bob@127.0.0.1 (Referred-By sip:alice@127.0.0.1)"), "lines: \(lines.text)")
        // The subscription's dialog is gone at both ends once it ended.
        #expect(await bob.wait(timeout: .seconds(5)) { bob.transfers.withLock { $0.incoming.isEmpty } })
        #expect(alice.transfers.withLock { $0.outgoing.isEmpty })
    }

    @Test("through the Call handle: transfer(to:targetDialog:) succeeds and the call ends transferred")
    func callHandle() async throws {
        let lines = T.Lines()
        let alice = try T.phone("alice", lines: lines), bob = try T.phone("bob", lines: lines), carol = try T.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let call = await alice.dial(try T.uri(bob, "bob"))
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEstablished }
        let target = try T.uri(carol, "carol")
        #expect(try await call.transfer(to: target, targetDialog: .always, notifyTimeout: .seconds(5)) == .succeeded(200), "lines: \(lines.text)")
        try await call.waitUntil(timeout: .seconds(5)) { $0.isEnded }
        #expect(call.state == .ended(.transferred(to: .sip(target))))
        #expect(lines.contains("outside the call (Target-Dialog"))
    }

    @Test("refused: no Target-Dialog or one naming no call of ours → 403; one that does not parse → 400 naming the rule; nothing is called")
    func refused() async throws {
        let lines = T.Lines()
        let alice = try T.phone("alice", lines: lines), bob = try T.phone("bob", lines: lines), carol = try T.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try T.uri(bob, "bob"))
        #expect(await T.up(alice, ab))
        let remoteTag = try #require(await alice.agent.session(ab)?.dialog?.id.remoteTag)
        let bobURI = try T.uri(bob, "bob"), carolURI = try T.uri(carol, "carol")
        let td = SIPHeaderName("Target-Dialog")
        #expect(await Self.rawRefer(alice, to: bobURI, referTo: carolURI, [])?.statusCode == 403)
        // Alice's own point of view (tags swapped) names no dialog bob holds.
        let swapped = TargetDialog(callID: ab.callID, localTag: ab.localTag, remoteTag: remoteTag).description
        #expect(await Self.rawRefer(alice, to: bobURI, referTo: carolURI, [(td, swapped)])?.statusCode == 403)
        #expect(await Self.rawRefer(alice, to: bobURI, referTo: carolURI, [(td, "nosuch;local-tag=\(remoteTag);remote-tag=\(ab.localTag)")])?.statusCode == 403)
        let bad = await Self.rawRefer(alice, to: bobURI, referTo: carolURI, [(td, "\(ab.callID);local-tag=\(remoteTag)")])
        #expect(bad?.statusCode == 400)
        #expect(bad?.values(.warning).first?.contains("Target-Dialog: headerStructure") == true, "\(String(describing: bad?.values(.warning)))")
        // An extension it does not know, required: 420 with Unsupported (tdialog itself is known).
        let good = TargetDialog.naming(ab, remoteTag: remoteTag).description
        let required = await Self.rawRefer(alice, to: bobURI, referTo: carolURI, [(td, good), (.require, "tdialog, foo")])
        #expect(required?.statusCode == 420)
        #expect(required?.values(.unsupported).first == "foo")
        #expect(carol.incomingCalls.isEmpty)
        #expect(alice.states(ab).last == .confirmed, "the call is untouched")
        // The REFER policy's explicit permission takes one without Target-Dialog.
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: T.fast),
                                           identity: try SIPURI("sip:dave@127.0.0.1"))
        c.sessionTimer = nil
        let dave = try Phone(name: "dave", configuration: c, referPolicy: ReferPolicy(allowsOutOfDialog: true), report: { lines.add($0) })
        defer { dave.close() }
        let open = await Self.rawRefer(alice, to: try T.uri(dave, "dave"), referTo: carolURI, [])
        #expect(open?.statusCode == 202)
        #expect(open?.toTag != nil, "the 202 creates the subscription's dialog")
        #expect(await carol.wait(timeout: .seconds(5)) { carol.incomingCalls.count == 1 }, "lines: \(lines.text)")
    }

    @Test("the application's REFER decision is asked with the call the Target-Dialog names, and may decline (603)")
    func decisionSeesTheCall() async throws {
        let lines = T.Lines()
        let asked = Mutex<[SessionKey]>([])
        let alice = try T.phone("alice", lines: lines)
        let bob = try T.phone("bob", lines: lines, referDecision: { k, _ in asked.withLock { $0.append(k) }; return false })
        let carol = try T.phone("carol", lines: lines)
        defer { alice.close(); bob.close(); carol.close() }
        let ab = await alice.call(try T.uri(bob, "bob"))
        #expect(await T.up(alice, ab))
        let bk = try #require(bob.incomingCalls.first)
        #expect(await alice.transfer(ab, to: try T.uri(carol, "carol"), targetDialog: .always, notifyTimeout: .seconds(5)) == .refused(603))
        #expect(asked.withLock { $0 } == [bk])
        #expect(carol.incomingCalls.isEmpty)
        #expect(alice.states(ab).last == .confirmed)
    }
}
