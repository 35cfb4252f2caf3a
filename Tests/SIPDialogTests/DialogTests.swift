import Testing
import SIPMessage
@testable import SIPDialog

/// Parses text whose line ends are LF or CRLF (written as CRLF on the wire).
func msg(_ s: String) -> SIPMessage {
    var out = ""
    for c in s.unicodeScalars where c != "\r" { if c == "\n" { out += "\r\n" } else { out.unicodeScalars.append(c) } }
    return try! SIPMessage(bytes: Array(out.utf8))
}

/// The call flow of RFC 3261 §24.2: Alice calls Bob through two record-routing proxies.
enum Flow {
    static let invite = msg("""
    INVITE sip:bob@biloxi.example.com SIP/2.0
    Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK74bf9
    Max-Forwards: 70
    From: Alice <sip:alice@atlanta.example.com>;tag=9fxced76sl
    To: Bob <sip:bob@biloxi.example.com>
    Call-ID: 3848276298220188511@atlanta.example.com
    CSeq: 1 INVITE
    Contact: <sip:alice@client.atlanta.example.com;transport=tcp>
    Content-Length: 0


    """)

    /// The INVITE as Bob receives it, with both proxies' Record-Route.
    static let inviteAtBob = msg("""
    INVITE sip:bob@client.biloxi.example.com SIP/2.0
    Via: SIP/2.0/TCP ss2.biloxi.example.com:5060;branch=z9hG4bK721e4.1
    Via: SIP/2.0/TCP ss1.atlanta.example.com:5060;branch=z9hG4bK2d4790.1
    Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK74bf9
    Max-Forwards: 68
    Record-Route: <sip:ss2.biloxi.example.com;lr>, <sip:ss1.atlanta.example.com;lr>
    From: Alice <sip:alice@atlanta.example.com>;tag=9fxced76sl
    To: Bob <sip:bob@biloxi.example.com>
    Call-ID: 3848276298220188511@atlanta.example.com
    CSeq: 1 INVITE
    Contact: <sip:alice@client.atlanta.example.com;transport=tcp>
    Content-Length: 0


    """)

    static let ok = msg("""
    SIP/2.0 200 OK
    Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK74bf9;received=192.0.2.101
    Record-Route: <sip:ss2.biloxi.example.com;lr>, <sip:ss1.atlanta.example.com;lr>
    From: Alice <sip:alice@atlanta.example.com>;tag=9fxced76sl
    To: Bob <sip:bob@biloxi.example.com>;tag=314159
    Call-ID: 3848276298220188511@atlanta.example.com
    CSeq: 1 INVITE
    Contact: <sip:bob@client.biloxi.example.com;transport=tcp>
    Content-Length: 0


    """)
}

@Suite("Dialogs (RFC 3261 §12)")
struct DialogTests {
    let via = try! Via("SIP/2.0/TCP client.atlanta.example.com:5060;branch=z9hG4bKnew")

    @Test func uacDialogFromTheTwoHundred() throws {
        var d = try Dialog(uacRequest: Flow.invite, response: Flow.ok)
        #expect(d.state == .confirmed)
        #expect(d.isUAC)
        #expect(d.id == DialogID(callID: "3848276298220188511@atlanta.example.com", localTag: "9fxced76sl", remoteTag: "314159"))
        #expect(d.remoteTarget.description == "sip:bob@client.biloxi.example.com;transport=tcp")
        // The UAC reverses the Record-Route.
        #expect(d.routeSet.map { $0.uri.description } == ["sip:ss1.atlanta.example.com;lr", "sip:ss2.biloxi.example.com;lr"])
        #expect(d.localSequence == 1)
        #expect(d.remoteSequence == nil)
        let bye = try d.makeRequest(.bye, via: via)
        #expect(bye.requestURIText == "sip:bob@client.biloxi.example.com;transport=tcp")
        #expect(try bye.route().map { $0.uri.description } == ["sip:ss1.atlanta.example.com;lr", "sip:ss2.biloxi.example.com;lr"])
        #expect(try bye.cseq() == CSeq(2, .bye))
        #expect(bye.fromTag == "9fxced76sl")
        #expect(bye.toTag == "314159")
        #expect(bye.callID == "3848276298220188511@atlanta.example.com")
        try bye.validate()
        let ack = try d.makeAck(for: Flow.invite, via: via)
        #expect(try ack.cseq() == CSeq(1, .ack))
        #expect(ack.requestURIText == bye.requestURIText)
        #expect(d.localSequence == 2)
    }

    @Test func uasDialogKeepsTheRecordRouteOrder() throws {
        var response = SIPMessage(responseTo: Flow.inviteAtBob, statusCode: 200, toTag: "314159")
        try response.append(.contact, "<sip:bob@client.biloxi.example.com;transport=tcp>")
        var d = try Dialog(uasRequest: Flow.inviteAtBob, response: response)
        #expect(!d.isUAC)
        #expect(d.id == DialogID(callID: "3848276298220188511@atlanta.example.com", localTag: "314159", remoteTag: "9fxced76sl"))
        #expect(d.routeSet.map { $0.uri.description } == ["sip:ss2.biloxi.example.com;lr", "sip:ss1.atlanta.example.com;lr"])
        #expect(d.remoteTarget.description == "sip:alice@client.atlanta.example.com;transport=tcp")
        #expect(d.remoteSequence == 1)
        // Bob's BYE: From is Bob with his tag, To is Alice with hers, CSeq starts fresh.
        let bye = try d.makeRequest(.bye, via: via)
        #expect(bye.fromTag == "314159")
        #expect(bye.toTag == "9fxced76sl")
        #expect(try bye.cseq() == CSeq(1, .bye))
        #expect(bye.requestURIText == "sip:alice@client.atlanta.example.com;transport=tcp")
    }

    @Test func strictRouterGetsTheRequestURI() throws {
        let ok = msg("""
        SIP/2.0 200 OK
        Via: SIP/2.0/UDP a;branch=z9hG4bK1
        Record-Route: <sip:strict.example.com>, <sip:loose.example.com;lr>
        From: <sip:a@a>;tag=1
        To: <sip:b@b>;tag=2
        Call-ID: strict
        CSeq: 1 INVITE
        Contact: <sip:b@10.0.0.2>
        Content-Length: 0


        """)
        let invite = msg("INVITE sip:b@b SIP/2.0\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\nFrom: <sip:a@a>;tag=1\nTo: <sip:b@b>\nCall-ID: strict\nCSeq: 1 INVITE\nContact: <sip:a@10.0.0.1>\n\n")
        var d = try Dialog(uacRequest: invite, response: ok)
        // Reversed: loose first, so the remote target stays the Request-URI.
        #expect(d.requestTarget.requestURI.description == "sip:b@10.0.0.2")
        let m = try d.makeRequest(.info, via: via)
        #expect(try m.route().count == 2)
        // With the strict router first: its URI becomes the Request-URI, the target goes last.
        let ok2 = msg(String(decoding: ok.serialized(), as: UTF8.self).replacingOccurrences("<sip:strict.example.com>, <sip:loose.example.com;lr>", "<sip:loose.example.com;lr>, <sip:strict.example.com>"))
        let d2 = try Dialog(uacRequest: invite, response: ok2)
        let t = d2.requestTarget
        #expect(t.requestURI.description == "sip:strict.example.com")
        #expect(t.route.map { $0.uri.description } == ["sip:loose.example.com;lr", "sip:b@10.0.0.2"])
    }

    @Test func earlyDialogIsConfirmedByTheTwoHundred() throws {
        let ringing = msg(String(decoding: Flow.ok.serialized(), as: UTF8.self)
            .replacingOccurrences("SIP/2.0 200 OK", "SIP/2.0 180 Ringing")
            .replacingOccurrences("client.biloxi", "early.biloxi"))
        var d = try Dialog(uacRequest: Flow.invite, response: ringing)
        #expect(d.state == .early)
        #expect(d.remoteTarget.description.contains("early.biloxi"))
        try d.confirm(with: Flow.ok)
        #expect(d.state == .confirmed)
        #expect(d.remoteTarget.description == "sip:bob@client.biloxi.example.com;transport=tcp")
    }

    /// `secure` follows the Request-URI's scheme in either case (§12.1.1), whether the URI is read
    /// on its bytes (a plain one) or decoded (an escaped user part).
    @Test func uasDialogIsSecureForASipsRequestURI() throws {
        let cases = [("sips:bob@client.biloxi.example.com", true), ("SIPS:bob@client.biloxi.example.com", true),
                     ("sip:bob@client.biloxi.example.com", false), ("sips:b%6Fb@client.biloxi.example.com", true),
                     ("sip:b%6Fb@client.biloxi.example.com", false)]
        for (uri, secure) in cases {
            let invite = msg(String(decoding: Flow.inviteAtBob.serialized(), as: UTF8.self).replacingOccurrences(
                "INVITE sip:bob@client.biloxi.example.com SIP/2.0", "INVITE \(uri) SIP/2.0"))
            var response = SIPMessage(responseTo: invite, statusCode: 200, toTag: "314159")
            try response.append(.contact, "<sip:bob@client.biloxi.example.com>")
            #expect(try Dialog(uasRequest: invite, response: response).secure == secure, "\(uri)")
        }
    }

    /// The Contact check of a dialog-creating request: addresses that decode, not none, not the
    /// wildcard, not one that does not parse.
    @Test func contactCheckWantsDecodableAddresses() {
        let text = String(decoding: Flow.invite.serialized(), as: UTF8.self)
        let contact = "Contact: <sip:alice@client.atlanta.example.com;transport=tcp>\r\n"
        func with(_ line: String) -> SIPMessage { msg(text.replacingOccurrences(contact, line)) }
        #expect(Flow.invite.hasContactAddresses)
        #expect(with("Contact: <sip:a@192.0.2.1>, \"B\" <sip:b@192.0.2.2>;q=0.5\r\n").hasContactAddresses)
        #expect(!with("").hasContactAddresses)
        #expect(!with("Contact: *\r\n").hasContactAddresses)
        #expect(!with("Contact: <sip:alice@client\r\n").hasContactAddresses)
        #expect(!with("Contact: <sip:a@192.0.2.1>;q=2\r\n").hasContactAddresses)
    }

    /// An incoming request matches a dialog (UAS side) by Call-ID, its To tag (ours) and its
    /// From tag (the peer's), as `DialogID(incoming:)` compares them.
    @Test func incomingRequestsMatchByCallIDAndTags() {
        let id = DialogID(callID: "3848276298220188511@atlanta.example.com", localTag: "314159", remoteTag: "9fxced76sl")
        let text = String(decoding: Flow.invite.serialized(), as: UTF8.self).replacingOccurrences(
            "To: Bob <sip:bob@biloxi.example.com>", "To: Bob <sip:bob@biloxi.example.com>;tag=314159")
        let inDialog = msg(text)
        #expect(id.matches(incoming: inDialog) && DialogID(incoming: inDialog) == id)
        #expect(!id.matches(incoming: Flow.invite))
        #expect(!id.matches(incoming: msg(text.replacingOccurrences("tag=314159", "tag=31415"))))
        #expect(!id.matches(incoming: msg(text.replacingOccurrences("tag=9fxced76sl", "tag=9fxced76sm"))))
        #expect(!id.matches(incoming: msg(text.replacingOccurrences("Call-ID: 3848", "Call-ID: 4848"))))
    }

    @Test func receivedRequestsFollowSection1222() throws {
        var d = try Dialog(uacRequest: Flow.invite, response: Flow.ok)
        func fromBob(_ method: String, cseq: Int, contact: String? = nil, toTag: String = "9fxced76sl") -> SIPMessage {
            msg("""
            \(method) sip:alice@client.atlanta.example.com SIP/2.0
            Via: SIP/2.0/TCP client.biloxi.example.com;branch=z9hG4bKb\(cseq)
            From: Bob <sip:bob@biloxi.example.com>;tag=314159
            To: Alice <sip:alice@atlanta.example.com>;tag=\(toTag)
            Call-ID: 3848276298220188511@atlanta.example.com
            CSeq: \(cseq) \(method)
            \(contact.map { "Contact: <\($0)>" } ?? "Max-Forwards: 70")
            Content-Length: 0


            """)
        }
        try d.receive(fromBob("INFO", cseq: 10))
        #expect(d.remoteSequence == 10)
        #expect(throws: DialogError.outOfOrder(received: 9, last: 10)) { try d.receive(fromBob("INFO", cseq: 9)) }
        #expect(throws: DialogError.notThisDialog) { try d.receive(fromBob("INFO", cseq: 11, toTag: "someone-else")) }
        // A re-INVITE with a new Contact refreshes the remote target.
        try d.receive(fromBob("INVITE", cseq: 11, contact: "sip:bob@198.51.100.9:5070"))
        #expect(d.remoteTarget.description == "sip:bob@198.51.100.9:5070")
        // An INFO's Contact does not.
        try d.receive(fromBob("INFO", cseq: 12, contact: "sip:ignored@x"))
        #expect(d.remoteTarget.description == "sip:bob@198.51.100.9:5070")
        try d.receive(fromBob("BYE", cseq: 13))
        #expect(d.state == .terminated)
    }

    @Test func missingPiecesAreTypedErrors() {
        let noTag = msg(String(decoding: Flow.ok.serialized(), as: UTF8.self).replacingOccurrences(";tag=314159", ""))
        #expect(throws: DialogError.missing("From tag, To tag and Call-ID")) { _ = try Dialog(uacRequest: Flow.invite, response: noTag) }
        let noContact = msg(String(decoding: Flow.ok.serialized(), as: UTF8.self).replacingOccurrences("Contact: <sip:bob@client.biloxi.example.com;transport=tcp>\r\n", ""))
        #expect(throws: DialogError.missing("Contact in the response")) { _ = try Dialog(uacRequest: Flow.invite, response: noContact) }
        let failure = SIPMessage(responseTo: Flow.invite, statusCode: 486, toTag: "x")
        #expect(throws: DialogError.missing("a 101-299 response")) { _ = try Dialog(uacRequest: Flow.invite, response: failure) }
    }

    @Test func headerFailuresMapToDialogErrors() {
        // A Contact that does not parse: the parse error is kept, typed, in either role.
        let badContact = msg(String(decoding: Flow.ok.serialized(), as: UTF8.self).replacingOccurrences(
            "Contact: <sip:bob@client.biloxi.example.com;transport=tcp>", "Contact: <sip:bob@client"))
        #expect { _ = try Dialog(uacRequest: Flow.invite, response: badContact) } throws: { error in
            if case .malformed = error as? DialogError { return true } else { return false }
        }
        // The mapping itself: parse errors are malformed, dialog errors pass, the rest is missing.
        let parse = SIPParseError(offset: 3, rule: .headerValue, detail: "x")
        #expect(DialogError(reading: parse) == .malformed(parse))
        #expect(DialogError(reading: DialogError.notThisDialog) == .notThisDialog)
        struct Other: Error, CustomStringConvertible { var description: String { "other" } }
        #expect(DialogError(reading: Other()) == .missing("other"))
    }

    @Test("a Contact's URI is read as written in its usual shapes; any other is left to the decoder")
    func contactURIAsWritten() {
        func written(_ s: String) -> String? { Dialog.writtenURI(ArraySlice(s.utf8)) }
        #expect(written("<sip:bob@192.0.2.9:5070;transport=tcp>;expires=60") == "sip:bob@192.0.2.9:5070;transport=tcp")
        #expect(written("Bob <sip:bob@b.example>") == "sip:bob@b.example")
        #expect(written("\"B<o>b, \\\"the\\\" ; one\" <sips:bob@b.example>, <sip:other@c>") == "sips:bob@b.example")
        // An addr-spec: its parameters belong to the header (RFC 3261 §20), a list ends at ','.
        #expect(written("sip:sipp@127.0.0.1:5061") == "sip:sipp@127.0.0.1:5061")
        #expect(written("sip:sipp@127.0.0.1:5061;expires=60") == "sip:sipp@127.0.0.1:5061")
        #expect(written("sip:a@192.0.2.1, sip:b@192.0.2.2") == "sip:a@192.0.2.1")
        // Not these: the wildcard, no scheme, white space, an unclosed bracket or quote.
        for odd in ["*", "<bob@b.example>", "Bob sip:bob@b.example", "<sip:bob@b.example", "<sip:bob @b.example>", "\"Bob <sip:b@c>", "<>"] {
            #expect(written(odd) == nil, "\(odd)")
        }
    }

    @Test("a dialog made without decoding From, To and Contact again equals the decoded one and builds the same requests")
    func writtenPartiesMatchDecodedOnes() throws {
        var response = SIPMessage(responseTo: Flow.inviteAtBob, statusCode: 200, toTag: "314159")
        try response.append(.contact, "<sip:bob@client.biloxi.example.com;transport=tcp>")
        var decoded = try Dialog(uasRequest: Flow.inviteAtBob, response: response)
        var taken = try Dialog(uasRequest: Flow.inviteAtBob, response: response, decoding: false)
        #expect(taken == decoded)
        #expect(try taken.remoteParty == Flow.inviteAtBob.from() && taken.localParty == response.to())
        #expect(try taken.makeRequest(.bye, via: via).serialized() == decoded.makeRequest(.bye, via: via).serialized())
        // The session's Call-ID is the dialog's only when it is the message's.
        let callID = "3848276298220188511@atlanta.example.com"
        #expect(try Dialog(uasRequest: Flow.inviteAtBob, response: response, decoding: false, callID: callID).id == decoded.id)
        #expect(try Dialog(uasRequest: Flow.inviteAtBob, response: response, decoding: false, callID: "other@x").id.callID == callID)
        #expect(try Dialog(uacRequest: Flow.invite, response: Flow.ok, decoding: false, callID: "3848276298220188511@atlanta.example.coM").id.callID == callID)

        var uac = try Dialog(uacRequest: Flow.invite, response: Flow.ok, decoding: false)
        var uacDecoded = try Dialog(uacRequest: Flow.invite, response: Flow.ok)
        #expect(try uac == uacDecoded && uac.remoteParty == Flow.ok.to())
        #expect(try uac.makeRequest(.bye, via: via).serialized() == uacDecoded.makeRequest(.bye, via: via).serialized())

        // Record-Route lists: split at commas outside quotes and brackets, over several lines.
        var routed = Flow.inviteAtBob
        try routed.append(.recordRoute, "\"P, one\" <sip:p1.example;lr>;x=1 ,<sip:p2.example;lr>")
        var routedOK = SIPMessage(responseTo: routed, statusCode: 200, toTag: "314159")
        try routedOK.append(.contact, "<sip:bob@client.biloxi.example.com;transport=tcp>")
        var fast = try Dialog(uasRequest: routed, response: routedOK, decoding: false)
        var slow = try Dialog(uasRequest: routed, response: routedOK)
        #expect(try fast == slow && fast.routeSet == routed.recordRoute())
        let routedBye = try fast.makeRequest(.bye, via: via)
        #expect(routedBye.values(.route) == ["<sip:ss2.biloxi.example.com;lr>", "<sip:ss1.atlanta.example.com;lr>",
                                             "\"P, one\" <sip:p1.example;lr>;x=1", "<sip:p2.example;lr>"])
        #expect(try routedBye.serialized() == slow.makeRequest(.bye, via: via).serialized())

        // A bare Contact URI (SIPp's) with a header parameter: the URI alone is the target.
        let sipp = msg(String(decoding: Flow.invite.serialized(), as: UTF8.self).replacingOccurrences(
            "Contact: <sip:alice@client.atlanta.example.com;transport=tcp>", "Contact: sip:sipp@127.0.0.1:5061;expires=60"))
        var bare = try Dialog(uasRequest: sipp, response: SIPMessage(responseTo: sipp, statusCode: 180, toTag: "b1"), decoding: false)
        #expect(try bare.remoteTarget == URI("sip:sipp@127.0.0.1:5061") && bare.state == .early)
        #expect(try bare.makeRequest(.bye, via: via).requestURIText == "sip:sipp@127.0.0.1:5061")
    }
}

extension String {
    func replacingOccurrences(_ a: String, _ b: String) -> String {
        var out = ""
        var rest = self[...]
        while let r = rest.firstRange(of: a) {
            out += rest[..<r.lowerBound] + b
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}

@Suite("Session keys")
struct SessionKeyTests {
    /// The hash reads only the Call-ID; keys that differ only in the tag stay distinct keys.
    @Test func keysSharingACallIDStayDistinctAndEqualKeysHashEqually() {
        let a = SessionKey(callID: "1-2345@192.0.2.1", localTag: "abc")
        let b = SessionKey(callID: "1-2345@192.0.2.1", localTag: "xyz")
        let c = SessionKey(callID: String("1-2345@192.0.2.1".reversed().reversed()), localTag: "abc")
        #expect(a != b)
        #expect(a == c && a.hashValue == c.hashValue)
        var table: [SessionKey: Int] = [a: 1, b: 2]
        #expect(table[c] == 1 && table[b] == 2 && table.count == 2)
        table[SessionKey(callID: "other@192.0.2.1", localTag: "abc")] = 3
        #expect(table.count == 3 && table[a] == 1)
    }

    /// A session's timers are kept by kind in eight slots (`SIPUserAgent`): the kinds number
    /// 0, 1, 2… in order, and there are no more than eight.
    @Test func timerKindsNumberTheSlotsOfASessionsTimers() {
        #expect(SessionTimer.allCases.map(\.rawValue) == Array(0..<SessionTimer.allCases.count))
        #expect(SessionTimer.allCases.count <= 8)
    }

    /// A table's hash (folded eight bytes at a time, the last word partial) reads every byte of
    /// the Call-ID, at every length, and follows the table's seed; equal Call-IDs hash alike
    /// however their strings were made (small, native, from a substring).
    @Test func theTableHashReadsEveryByteOfTheCallID() {
        for length in 1...40 {
            let base = String(repeating: "a", count: length)
            var seen: Set<Int> = [SessionKey(callID: base, localTag: "t")._rawHashValue(seed: 7)]
            for position in 0..<length {
                var bytes = Array(base.utf8)
                bytes[position] = UInt8(ascii: "b")
                seen.insert(SessionKey(callID: String(decoding: bytes, as: UTF8.self), localTag: "t")._rawHashValue(seed: 7))
            }
            #expect(seen.count == length + 1, "a Call-ID of \(length) bytes: a changed byte must change the hash")
            let whole = "x" + base + "y"
            let made = SessionKey(callID: String(whole.dropFirst().dropLast()), localTag: "t")
            #expect(made._rawHashValue(seed: 7) == SessionKey(callID: base, localTag: "u")._rawHashValue(seed: 7))
            #expect(made._rawHashValue(seed: 7) != made._rawHashValue(seed: 8))
        }
        var table: [SessionKey: Int] = [:]
        for n in 0..<10_000 { table[SessionKey(callID: "\(n)-4711@192.0.2.1", localTag: "t")] = n }
        #expect(table.count == 10_000 && table[SessionKey(callID: "1234-4711@192.0.2.1", localTag: "t")] == 1234)
        let hashes = Set((0..<10_000).map { SessionKey(callID: "\($0)-4711@192.0.2.1", localTag: "t")._rawHashValue(seed: 1) })
        #expect(hashes.count == 10_000)
    }
}
