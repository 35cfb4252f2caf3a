import Testing
import SwitchboardTestSupport
import SIPMessage
@testable import SIPDialog

/// `Target-Dialog` (RFC 4538 §7): reading, writing, matching against our dialogs, bad input.
@Suite("Target-Dialog (RFC 4538)")
struct TargetDialogTests {
    /// Values that parse, and what they hold.
    static let good: [(text: String, callID: String, local: String, remote: String, extra: [String])] = [
        ("d7@a;local-tag=l1;remote-tag=r1", "d7@a", "l1", "r1", []),
        ("d7@a;remote-tag=r1;local-tag=l1", "d7@a", "l1", "r1", []),
        ("  abc ; LOCAL-TAG = x.y-z ;Remote-Tag=7", "abc", "x.y-z", "7", []),
        ("d@[2001:db8::1];local-tag=a;remote-tag=b;foo=bar;flag", "d@[2001:db8::1]", "a", "b", ["foo", "flag"]),
        ("id;local-tag=a;remote-tag=b;q=\"quoted ; value\"", "id", "a", "b", ["q"]),
    ]

    @Test("values that parse: Call-ID, tags in either order, names in any case, whitespace, other parameters kept", arguments: 0..<5)
    func parses(_ i: Int) throws {
        let c = Self.good[i]
        let t = try TargetDialog(c.text)
        #expect(t.callID == c.callID)
        #expect(t.localTag == c.local)
        #expect(t.remoteTag == c.remote)
        #expect(t.parameters.map(\.name) == c.extra)
        // What we write reads back the same.
        #expect(try TargetDialog(t.description) == t)
    }

    /// Values refused, with the rule and the byte where reading stopped.
    static let bad: [(text: String, rule: SIPParseError.Rule, offset: Int)] = [
        ("", .headerStructure, 0),
        (";local-tag=a;remote-tag=b", .headerStructure, 0),
        ("id", .headerStructure, 2),
        ("id;local-tag=a", .headerStructure, 14),
        ("id;remote-tag=b", .headerStructure, 15),
        ("id@;local-tag=a;remote-tag=b", .headerStructure, 3),
        ("id local-tag=a", .headerStructure, 3),
        ("id;;local-tag=a;remote-tag=b", .parameter, 3),
        ("id;local-tag=;remote-tag=b", .parameter, 13),
        ("id;local-tag;remote-tag=b", .token, 3),
        ("id;local-tag=a;local-tag=c;remote-tag=b", .parameter, 15),
        ("id;local-tag=a;remote-tag=b;x=\"open", .quotedString, 30),
        ("id;local-tag=a\u{1};remote-tag=b", .headerStructure, 14),
    ]

    @Test("bad values: a typed error naming the rule and the byte", arguments: 0..<13)
    func refuses(_ i: Int) {
        let c = Self.bad[i]
        #expect(throws: SIPParseError.self) { try TargetDialog(c.text) }
        do {
            _ = try TargetDialog(c.text)
        } catch {
            #expect(error.rule == c.rule, "\(c.text): \(error)")
            #expect(error.offset == c.offset, "\(c.text): \(error)")
        }
    }

    @Test("the recipient's point of view: the peer of a dialog writes its own tag as remote-tag, and we find ours in local-tag")
    func pointOfView() throws {
        // Alice holds the call as (Call-ID c1, her tag A) with Bob's tag B; she writes it for Bob.
        let written = TargetDialog.naming(SessionKey(callID: "c1", localTag: "A"), remoteTag: "B")
        #expect(written.description == "c1;local-tag=B;remote-tag=A")
        // Bob holds it as (c1, B) with peer tag A: it names his dialog, and nobody else's.
        let read = try TargetDialog(written.description)
        #expect(read.names(SessionKey(callID: "c1", localTag: "B"), remoteTag: "A"))
        #expect(!read.names(SessionKey(callID: "c1", localTag: "A"), remoteTag: "B"), "tags swapped: not ours")
        #expect(!read.names(SessionKey(callID: "c2", localTag: "B"), remoteTag: "A"))
        #expect(!read.names(SessionKey(callID: "c1", localTag: "B"), remoteTag: nil))
        // Byte for byte: tags are not case-folded (RFC 3261 §19.3).
        #expect(!read.names(SessionKey(callID: "C1", localTag: "B"), remoteTag: "A"))
    }

    @Test("in a REFER: one Target-Dialog read, two refused, a bad one refused with 400 naming the rule")
    func inRefer() throws {
        func refer(_ values: [String]) throws -> SIPMessage {
            var m = try SIPMessage(method: .refer, uri: try SIPURI("sip:bob@b.example"))
            try m.append(.callID, "x1")
            try m.append(.cseq, CSeq(1, .refer))
            try m.append(.referTo, "<sip:carol@c.example>")
            for v in values { try m.append(SIPHeaderName("Target-Dialog"), v) }
            return m
        }
        #expect(try TargetDialog.read(try refer([])) == nil)
        #expect(try TargetDialog.read(try refer(["c;local-tag=a;remote-tag=b"]))?.callID == "c")
        #expect(throws: SIPParseError.self) { try TargetDialog.read(try refer(["c;local-tag=a;remote-tag=b", "d;local-tag=a;remote-tag=b"])) }
        switch ReferRequest.read(try refer(["c;local-tag=a"]), policy: ReferPolicy(), inDialog: false, targetDialogKnown: true) {
        case .failure(let f):
            #expect(f.statusCode == 400)
            #expect(f.reason.contains("Target-Dialog") && f.reason.contains("headerStructure"), "\(f.reason)")
        case .success: Issue.record("a Target-Dialog without remote-tag was accepted")
        }
        // In a dialog it is not read: a bad one does not refuse an in-dialog REFER.
        #expect((try? ReferRequest.read(try refer(["garbage;;"]), policy: ReferPolicy(), inDialog: true).get()) != nil)
    }

    @Test("bad input of any shape: a value or a typed error, never a crash or a hang; long input refused at the bound")
    func fuzz() {
        var rng = TestRandom(seed: 4538)
        let alphabet = Array("ab@;=\" \t\\-.local-tagremote-tag[]:\u{0}\u{7f}é".utf8)
        for _ in 0..<5000 {
            let n = Int(rng.next() % 64)
            var bytes: [UInt8] = []
            for _ in 0..<n { bytes.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
            let text = String(decoding: bytes, as: UTF8.self)
            if let t = try? TargetDialog(text) {
                #expect(!t.callID.isEmpty && !t.localTag.isEmpty && !t.remoteTag.isEmpty)
                #expect((try? TargetDialog(t.description)) == t, "\(text.debugDescription) does not read back")
            }
        }
        let long = "c;local-tag=a;remote-tag=" + String(repeating: "b", count: TargetDialog.maximumLength)
        #expect(throws: SIPParseError.self) { try TargetDialog(long) }
    }

}
