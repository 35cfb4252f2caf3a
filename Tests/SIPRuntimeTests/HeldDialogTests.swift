import Synchronization
import Testing
import SIPMessage
import SIPTransaction
import SIPTransport
import SIPDialog
@testable import SIPRuntime
import NetworkIO

/// Dialogs a user agent holds outside INVITE sessions (a REFER's subscription, RFC 3515
/// §2.4.4), between two agents on 127.0.0.1: created by a REFER and its 202, requests in them
/// both ways, closing, the bound.
@Suite("SIPUserAgent: dialogs outside INVITE sessions")
struct HeldDialogTests {
    static let fast = TransactionTimers(t1: .milliseconds(20), t2: .milliseconds(160), t4: .milliseconds(200))

    static func agent(_ user: String, handlesRefer: Bool) throws -> SIPUserAgent {
        var c = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(try SocketAddress(ip: "127.0.0.1", port: 0))], timers: fast),
                                           identity: try SIPURI("sip:\(user)@127.0.0.1"))
        c.handlesOutOfDialogRefer = handlesRefer
        return try SIPUserAgent(configuration: c)
    }

    static func uri(_ a: SIPUserAgent, _ user: String) throws -> SIPURI {
        try SIPURI("sip:\(user)@127.0.0.1:\(a.endpoint.localAddresses[0].address.port)")
    }

    @Test("REFER → 202 makes a dialog at both ends; NOTIFYs in it reach the sender's application; closed, the next gets 481")
    func referDialog() async throws {
        let alice = try Self.agent("alice", handlesRefer: false), bob = try Self.agent("bob", handlesRefer: true)
        defer { alice.close(); bob.close() }
        let aliceEvents = AgentEvents(alice), bobEvents = AgentEvents(bob)
        let key = try #require(alice.openDialog())
        #expect(alice.holdsDialog(key))
        let bobURI = try Self.uri(bob, "bob")
        async let answer = alice.sendDialogCreatingRequest(key, .refer, to: bobURI,
                                                            headers: [(.referTo, "<sip:carol@127.0.0.1>")])
        // Bob's application gets the REFER unanswered, and answers it creating the dialog.
        var refer: (SIPMessage, TransactionID)?
        await bobEvents.wait("the out-of-dialog REFER") { events in
            for e in events { if case .outOfDialogRefer(let m, let tx, _) = e { refer = (m, tx); return true } }
            return false
        }
        let (m, tx) = try #require(refer)
        #expect(m.values(.contact).count == 1, "a REFER outside a dialog carries our Contact")
        let bobKey = try #require(bob.respond(to: m, in: tx, statusCode: 202, createsDialog: true))
        let response = await answer
        #expect(response?.statusCode == 202)
        #expect(response?.toTag == bobKey.localTag)
        #expect(response?.values(.supported).first?.contains("tdialog") == true)
        #expect(bobKey.callID == key.callID)
        // Bob notifies in the new dialog; alice's application answers.
        async let notified = bob.sendInDialog(bobKey, .notify, body: SessionBody(contentType: MediaType(type: "message", subtype: "sipfrag"),
                                                                                   bytes: Array("SIP/2.0 100 Trying\r\n".utf8)),
                                              headers: [(.event, "refer"), (.subscriptionState, "active;expires=60")])
        var notify: (SIPMessage, TransactionID)?
        await aliceEvents.wait("the NOTIFY") { events in
            for e in events { if case .dialogRequest(key, let m, let tx) = e { notify = (m, tx); return true } }
            return false
        }
        let (n, ntx) = try #require(notify)
        #expect(n.method == .notify && n.fromTag == bobKey.localTag && n.toTag == key.localTag)
        #expect((try? n.cseq().sequence) == 1)
        alice.respond(to: n, in: ntx, statusCode: 200)
        #expect(await notified?.statusCode == 200)
        // Alice closes her end: bob's next NOTIFY finds no dialog there (481).
        alice.closeDialog(key)
        #expect(!alice.holdsDialog(key))
        let late = await bob.sendInDialog(bobKey, .notify, headers: [(.event, "refer"), (.subscriptionState, "terminated")])
        #expect(late?.statusCode == 481)
        bob.closeDialog(bobKey)
        #expect(await bob.sendInDialog(bobKey, .notify) == nil, "no dialog: nothing sent")
    }

    @Test("an agent that does not hand out-of-dialog REFERs to its application refuses them with 403")
    func referRefusedWithoutHandler() async throws {
        let alice = try Self.agent("alice", handlesRefer: false), bob = try Self.agent("bob", handlesRefer: false)
        defer { alice.close(); bob.close() }
        let r = await alice.sendRequest(.refer, to: try Self.uri(bob, "bob"), headers: [(.referTo, "<sip:carol@127.0.0.1>")])
        #expect(r?.statusCode == 403)
        #expect(r?.values(.supported).first?.contains("tdialog") != true)
    }

    @Test("at most maximumDialogs are held; closing one frees a place")
    func bound() throws {
        let alice = try Self.agent("alice", handlesRefer: false)
        defer { alice.close() }
        var keys: [SessionKey] = []
        for _ in 0..<SIPUserAgent.maximumDialogs { keys.append(try #require(alice.openDialog())) }
        #expect(alice.openDialog() == nil)
        alice.closeDialog(keys[0])
        #expect(alice.openDialog() != nil)
    }
}
