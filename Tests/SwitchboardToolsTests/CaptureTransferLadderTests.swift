import Foundation
import Testing
import PacketCapture
@testable import SwitchboardTools
@testable import CaptureAnalysis

/// The ladders of transfer and forwarding flows (`scripts/ladders`): labels that show the
/// RFC 3515/3891/3892/5806 details, and the calls of one transfer drawn together.
@Suite("switchboard capture --ladder: transfer and forwarding flows")
struct CaptureTransferLadderTests {
    static let alice = CallDetailCapture.endpoint(1, 5060), bob = CallDetailCapture.endpoint(2, 5062), carol = CallDetailCapture.endpoint(3, 5064)

    /// A request of Call-ID `id` from `from` (tag `ftag`) to `to` (tag `ttag`, none for an initial request).
    static func request(_ method: String, _ id: String, cseq: Int, from: String, ftag: String, to: String, ttag: String?, extra: String = "") -> String {
        "\(method) sip:\(to)@192.0.2.9 SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.9;branch=z9hG4bK\(id)\(method)\(cseq)\(ftag)\n"
            + "From: <sip:\(from)@x>;tag=\(ftag)\nTo: <sip:\(to)@x>\(ttag.map { ";tag=\($0)" } ?? "")\nCall-ID: \(id)\nCSeq: \(cseq) \(method)\n\(extra)"
    }

    static func response(_ status: String, to request: String, ttag: String, extra: String = "") -> String {
        var lines = request.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[0] = "SIP/2.0 \(status)"
        lines = lines.filter { !$0.hasPrefix("Referred-By") && !$0.hasPrefix("Refer-To") && !$0.hasPrefix("Replaces")
            && !$0.hasPrefix("Event") && !$0.hasPrefix("Subscription-State") && !$0.hasPrefix("Content-Type") && !$0.hasPrefix("Diversion") }
        if let i = lines.firstIndex(where: { $0.hasPrefix("To:") }), !lines[i].contains(";tag=") { lines[i] += ";tag=\(ttag)" }
        return lines.joined(separator: "\n") + extra
    }

    /// alice calls bob (ab) and carol (ac), refers bob to carol with Replaces; bob's INVITE (bc)
    /// replaces ac; NOTIFYs 100 then 200; alice hangs up. Plus an unrelated call, and a 302.
    static func attendedTransfer() throws -> CallDetailCapture {
        let c = try CallDetailCapture()
        let (a, b, k) = (alice, bob, carol)
        func call(_ id: String, _ x: CaptureEndpoint, _ y: CaptureEndpoint, _ from: String, _ to: String, ftag: String, ttag: String, extra: String = "") {
            let invite = request("INVITE", id, cseq: 1, from: from, ftag: ftag, to: to, ttag: nil, extra: extra)
            c.sip(x, y, invite)
            c.sip(y, x, response("200 OK", to: invite, ttag: ttag))
            c.sip(x, y, request("ACK", id, cseq: 1, from: from, ftag: ftag, to: to, ttag: ttag))
        }
        call("ab", a, b, "alice", "bob", ftag: "a1", ttag: "b1")
        call("ac", a, k, "alice", "carol", ftag: "a2", ttag: "c2")
        let refer = request("REFER", "ab", cseq: 2, from: "alice", ftag: "a1", to: "bob", ttag: "b1",
                            extra: "Refer-To: <sip:carol@192.0.2.3:5064?Replaces=ac%3Bto-tag%3Dc2%3Bfrom-tag%3Da2>\nReferred-By: <sip:alice@x>\n")
        c.sip(a, b, refer)
        c.sip(b, a, response("202 Accepted", to: refer, ttag: "b1"))
        func notify(_ cseq: Int, _ frag: String, _ state: String) {
            let n = "NOTIFY sip:alice@192.0.2.1 SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKn\(cseq)\nFrom: <sip:bob@x>;tag=b1\n"
                + "To: <sip:alice@x>;tag=a1\nCall-ID: ab\nCSeq: \(cseq) NOTIFY\nEvent: refer\nSubscription-State: \(state)\n"
                + "Content-Type: message/sipfrag;version=2.0\n"
            c.sip(b, a, n, body: frag + "\n")
            c.sip(a, b, response("200 OK", to: n.replacingOccurrences(of: "Content-Type: message/sipfrag;version=2.0\n", with: ""), ttag: "a1"))
        }
        notify(1, "SIP/2.0 100 Trying", "active;expires=180")
        call("bc", b, k, "bob", "carol", ftag: "b3", ttag: "c3",
             extra: "Replaces: ac;to-tag=c2;from-tag=a2\nReferred-By: <sip:alice@x>\n")
        c.sip(k, a, request("BYE", "ac", cseq: 1, from: "carol", ftag: "c2", to: "alice", ttag: "a2"))
        notify(2, "SIP/2.0 200 OK", "terminated;reason=noresource")
        c.sip(a, b, request("BYE", "ab", cseq: 3, from: "alice", ftag: "a1", to: "bob", ttag: "b1"))
        // Not linked: drawn alone. A forwarded call: 302 with two Contacts and Diversion.
        let x = request("INVITE", "fw", cseq: 1, from: "alice", ftag: "a9", to: "dave", ttag: nil)
        c.sip(a, b, x)
        c.sip(b, a, response("302 Moved Temporarily", to: x, ttag: "d9",
                             extra: "Contact: <sip:carol@192.0.2.3:5064>;q=1.0, <sip:dave@192.0.2.4>;q=0.9\nDiversion: <sip:bob@x>;reason=unconditional\n"))
        return c
    }

    @Test("labels: NOTIFY with its sipfrag status and Subscription-State, Replaces and Referred-By, a 3xx's Contacts and Diversion")
    func labels() throws {
        let c = try Self.attendedTransfer()
        let r = c.run(.ladder("ab"))
        let labels = r.analysis.calls.first { $0.callID == "ab" }?.arrows.map(\.label) ?? []
        #expect(labels == ["INVITE", "200 OK", "ACK", "REFER (Replaces, Referred-By)", "202 Accepted", "NOTIFY (100 Trying, active)", "200 OK",
                           "NOTIFY (200 OK, terminated)", "200 OK", "BYE"])
        let bc = CaptureCommand.run(path: c.path, view: .ladder("bc"))
        #expect(bc.analysis.calls.first { $0.callID == "bc" }?.arrows.first?.label == "INVITE (Replaces, Referred-By)")
        // One Call-ID asked: its own ladder, not the group.
        #expect(bc.text.hasPrefix("Call-ID: bc  (answered)"))
        let fw = CaptureCommand.run(path: c.path, view: .ladder("fw"))
        #expect(fw.analysis.calls.first { $0.callID == "fw" }?.arrows.map(\.label) == ["INVITE", "302 Moved Temporarily (2 Contacts, Diversion)"])
    }

    @Test("every call: the linked calls of a transfer in one ladder, in time order, each label after its call's number; others alone")
    func linkedCallsDrawnTogether() throws {
        let c = try Self.attendedTransfer()
        let r = c.run(.ladder(nil))
        let lines = r.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "3 linked calls drawn together ([n] before a label: the call):")
        #expect(lines[1].hasPrefix("[1] Call-ID: ab  (answered)  dialog a1/b1"))
        #expect(lines[2].hasPrefix("[2] Call-ID: ac  (answered)  dialog a2/c2"))
        #expect(lines[3].hasPrefix("[3] Call-ID: bc  (answered)  dialog b3/c3"))
        // Three parties, three columns.
        #expect(lines[4].contains("192.0.2.1:5060") && lines[4].contains("192.0.2.2:5062") && lines[4].contains("192.0.2.3:5064"))
        let group = Array(lines[6...].prefix { !$0.isEmpty })
        #expect(group.count == 10 + 4 + 3)  // ab, ac (with its BYE), bc
        let times = group.map { Double($0.split(separator: " ")[0])! }
        #expect(times == times.sorted() && times.first == 0)
        // Across calls in capture order: bob's INVITE with Replaces after the first NOTIFY, carol's
        // BYE of the replaced call before the final NOTIFY, alice's BYE last.
        let order = ["─[1] NOTIFY (100 Trying, active)─", "─[3] INVITE (Replaces, Referred-By)─", "[2] BYE", "─[1] NOTIFY (200 OK, terminated)─", "─[1] BYE─"]
        let found = order.map { label in group.firstIndex { $0.contains(label) } }
        #expect(found.allSatisfy { $0 != nil } && found.map { $0! } == found.map { $0! }.sorted(), "\(group)")
        // Arrows go between the right parties: bob's INVITE starts at the second column.
        let invite = try #require(group.first { $0.contains("[3] INVITE") })
        #expect(invite.prefix { $0 != "─" }.filter { $0 == "│" }.count == 2, "\(invite)")
        #expect(invite.contains("──>│"))
        // The unlinked call keeps its own ladder after the group.
        #expect(lines.contains { $0.hasPrefix("Call-ID: fw  (") })
    }
}
