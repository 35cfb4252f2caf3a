import SIPMessage

/// A request the runner builds as text, so that tests control every byte (and can leave a
/// mandatory header out on purpose).
struct RequestDraft {
    var method: String
    var uri: String
    var branch: String
    var callID: String
    var fromTag: String
    var toTag: String?
    var cseq: UInt32
    var cseqMethod: String?
    var maxForwards: Int? = 70
    var extra: [String] = []
    var body: String = ""
    var contentType: String? = nil
    /// Header names (lowercased) to leave out.
    var omit: Set<String> = []
    /// The To URI, when not the target's (the `proxy` suite writes the callee's).
    var to: String? = nil

    func text(_ s: ConformanceSession) -> String {
        var lines = ["\(method) \(uri) SIP/2.0"]
        func add(_ name: String, _ value: String) { if !omit.contains(name.lowercased()) { lines.append("\(name): \(value)") } }
        add("Via", "SIP/2.0/\(s.viaTransport) \(s.hostPort);branch=\(branch);rport")
        if let mf = maxForwards { add("Max-Forwards", "\(mf)") }
        add("From", "<sip:conform@\(s.hostPort)>;tag=\(fromTag)")
        add("To", "<\(to ?? s.targetURI.description)>" + (toTag.map { ";tag=\($0)" } ?? ""))
        add("Call-ID", callID)
        add("CSeq", "\(cseq) \(cseqMethod ?? method)")
        add("Contact", "<sip:conform@\(s.hostPort)\(s.uriTransport)>")
        for e in extra { lines.append(e) }
        if let ct = contentType, !body.isEmpty { add("Content-Type", ct) }
        add("Content-Length", "\(body.utf8.count)")
        return lines.joined(separator: "\r\n") + "\r\n\r\n" + body
    }
}

/// The runner's side of one call it places (RFC 3261 §13 as UAC), kept as plain values.
struct PlacedCall {
    let session: ConformanceSession
    let callID: String
    let fromTag: String
    var cseq: UInt32 = 1
    var inviteBranch = ""
    /// The CSeq number of the call's latest INVITE outside the dialog (its CANCEL's).
    var inviteCSeq: UInt32 = 1
    var remoteTag: String?
    var extra: [String] = []

    init(_ session: ConformanceSession) {
        self.session = session
        callID = session.token() + "@conform"
        fromTag = session.token()
    }

    static func offer(_ s: ConformanceSession, port: Int = 49170, version: Int = 1) -> String {
        let ip = s.local.ipString, family = s.local.isIPv6 ? "IP6" : "IP4"
        return "v=0\r\no=conform 1 \(version) IN \(family) \(ip)\r\ns=-\r\nc=IN \(family) \(ip)\r\nt=0 0\r\n"
            + "m=audio \(port) RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=sendrecv\r\n"
    }

    func draft(_ method: String, branch: String, inDialog: Bool) -> RequestDraft {
        RequestDraft(method: method, uri: session.targetURI.description, branch: branch, callID: callID, fromTag: fromTag,
                     toTag: inDialog ? remoteTag : nil, cseq: cseq, extra: method == "ACK" ? [] : extra)
    }

    /// Sends the INVITE (with an SDP offer); `headers` go on this INVITE only, `extra` on every
    /// later request of the call too.
    mutating func invite(extra: [String] = [], headers: [String] = []) {
        self.extra = extra
        inviteBranch = session.branch()
        inviteCSeq = cseq
        var d = draft("INVITE", branch: inviteBranch, inDialog: false)
        d.extra += headers
        d.body = Self.offer(session)
        d.contentType = "application/sdp"
        session.send(d.text(session))
    }

    /// The ACK for a 2xx (its own transaction: a new branch), carrying `body` (an SDP answer to
    /// an offer in the 2xx) when given.
    func ack2xx(_ response: SIPMessage, body: String = "") {
        var d = draft("ACK", branch: session.branch(), inDialog: true)
        d.toTag = response.toTag
        d.cseq = (try? response.cseq().sequence) ?? cseq
        if !body.isEmpty { d.body = body; d.contentType = "application/sdp" }
        session.send(d.text(session))
    }

    /// The ACK for a non-2xx final response (in the INVITE's transaction: its branch and CSeq
    /// number, RFC 3261 §17.1.1.3); `branch` for an INVITE other than the first.
    func ackFailure(_ response: SIPMessage, branch: String? = nil) {
        var d = draft("ACK", branch: branch ?? inviteBranch, inDialog: false)
        d.toTag = response.toTag
        d.cseq = (try? response.cseq().sequence) ?? cseq
        session.send(d.text(session))
    }

    /// ACKs a final response to the INVITE sent with `branch` (2xx or not).
    func acknowledge(_ response: SIPMessage, branch: String, body: String = "") {
        if (200...299).contains(response.statusCode ?? 0) { ack2xx(response, body: body) } else { ackFailure(response, branch: branch) }
    }

    /// Sends `method` outside any dialog (a new branch, no To tag), after `adjust` has changed
    /// what a test breaks on purpose; returns its branch.
    func requestOutsideDialog(_ method: String, _ adjust: (inout RequestDraft) -> Void = { _ in }) -> String {
        let branch = session.branch()
        var d = draft(method, branch: branch, inDialog: false)
        adjust(&d)
        session.send(d.text(session))
        return branch
    }

    /// Sends a request in the dialog with the next CSeq; returns its branch. `headers` go on
    /// this request only.
    mutating func request(_ method: String, body: String = "", headers: [String] = []) -> String {
        cseq += 1
        let branch = session.branch()
        var d = draft(method, branch: branch, inDialog: true)
        d.extra += headers
        if !body.isEmpty { d.body = body; d.contentType = "application/sdp" }
        session.send(d.text(session))
        return branch
    }

    /// Sends CANCEL for the INVITE (same branch and CSeq number, RFC 3261 §9.1).
    func cancel() {
        var d = draft("CANCEL", branch: inviteBranch, inDialog: false)
        d.cseq = inviteCSeq
        d.extra = []
        session.send(d.text(session))
    }

    /// Places a call and waits for its final response; ACKs it (2xx or not). Returns it.
    mutating func establish(extra: [String] = [], headers: [String] = [], ackDelay: Duration = .zero) async -> SIPMessage? {
        invite(extra: extra, headers: headers)
        guard let final = await session.finalResponse(branch: inviteBranch, method: .invite) else { return nil }
        if (200...299).contains(final.statusCode ?? 0) {
            remoteTag = final.toTag
            if ackDelay > .zero { await session.pause(ackDelay) }
            ack2xx(final)
        } else {
            ackFailure(final)
        }
        return final
    }

    /// Hangs up with BYE and waits for its final response.
    mutating func hangUp() async -> SIPMessage? {
        let b = request("BYE")
        return await session.finalResponse(branch: b, method: .bye)
    }
}

/// The built-in suites.
public enum ConformanceSuites {
    /// Every suite by name.
    public static let all: [String: [ConformanceTestCase]] = ["uas": uas, "uac": uac, "registrar": registrar, "parser": ParserSuite.tests, "auth": auth,
                                                                 "proxy": ProxySuite.tests, "transfer": TransferSuite.tests, "transfer-uac": TransferSuite.uacTests,
                                                                 "forward": ForwardSuite.uacTests, "forward-uas": ForwardSuite.uasTests]

    /// The suites' names, sorted.
    public static var names: [String] { all.keys.sorted() }

    /// What a suite is for, one line.
    public static func summary(_ suite: String) -> String {
        switch suite {
        case "uas": return "the runner calls the DUT (a phone or any UAS): call set-up and release, re-INVITE, CANCEL, OPTIONS, odd requests, a second INVITE while one is pending (500), UPDATE and its 491, 100rel/PRACK, session timers (422, refresher), 420"
        case "uac": return "the DUT calls the runner (listening at TARGET): ACK of 2xx and non-2xx, INVITE retransmission, 2xx retransmission, 3xx, PRACK of a reliable 183, retry after 422"
        case "registrar": return "the runner registers at the DUT (a registrar, TARGET = the address of record): bindings, expires, wildcard, Min-Expires, CSeq order, digest challenge, nonce reuse"
        case "auth": return "the runner registers at the DUT (a registrar) with --user/--password: MD5, SHA-256, qop=auth with nc counting, a forged nonce refused"
        case "proxy": return "the runner calls itself through the DUT (a proxy at TARGET): Max-Forwards, Via, 483, Record-Route and in-dialog routing, loop 482, CANCEL, 4xx/6xx relayed back"
        case "transfer": return "the runner calls the DUT and plays the other parties of a transfer: the DUT as transferee (REFER blind and attended, NOTIFYs, refusals) and as transfer target (INVITE with Replaces)"
        case "transfer-uac": return "the DUT calls the runner (listening at TARGET) and transfers the call: REFER, the NOTIFYs answered, the call ended with BYE"
        case "forward": return "the DUT calls the runner (listening at TARGET), which redirects it with 302: ACK, Contacts in q order, no Contact, a redirect loop"
        case "forward-uas": return "the runner calls the DUT, set to forward: a 3xx with Contact(s), its Diversion / History-Info well formed"
        case "parser": return "the RFC 4475 and RFC 5118 torture messages (read from --corpus) sent to the DUT: it answers or drops each, and still answers OPTIONS after it (UDP)"
        default: return ""
        }
    }

    static let unverified = "no ETSI TS 102 027-2 identifier: the purposes near this one could not be read in full to confirm a match"

    /// `uas`: the runner is the UAC, the DUT answers.
    public static let uas: [ConformanceTestCase] = [
        ConformanceTestCase(name: "basic-call", etsiPurpose: "SIP_CC_TE_CE_V_001",
                            summary: "an INVITE with an offer is answered (1xx optional, then 2xx with Contact and an answer); ACK; BYE gets 200",
                            reference: "RFC 3261 §8.2, §13.3.1.1, §15.1.2", role: .uac) { s in
            var call = PlacedCall(s)
            guard let final = await call.establish() else { return .failed("no final response to the INVITE") }
            guard (200...299).contains(final.statusCode ?? 0) else { return .failed("the INVITE was refused \(final.statusCode ?? 0)") }
            guard let bye = await call.hangUp() else { return .failed("no final response to BYE ") }
            guard bye.statusCode == 200 else { return .failed("BYE answered \(bye.statusCode ?? 0), 200 expected") }
            return .passed
        },
        ConformanceTestCase(name: "reinvite", etsiPurpose: "SIP_CC_TE_SM_V_001",
                            summary: "a re-INVITE in an established call is answered 2xx with its own CSeq and the dialog's tag",
                            reference: "RFC 3261 §14.2, §12.2.2", role: .uac) { s in
            var call = PlacedCall(s)
            guard let final = await call.establish(), (200...299).contains(final.statusCode ?? 0) else {
                return .inconclusive("the call was not established, so no re-INVITE could be sent")
            }
            let b = call.request("INVITE", body: PlacedCall.offer(s, port: 49172, version: 2))
            let r = await s.finalResponse(branch: b, method: .invite)
            if let r, (200...299).contains(r.statusCode ?? 0) { call.ack2xx(r) } else if let r { call.ackFailure(r) }
            _ = await call.hangUp()
            guard let r else { return .failed("no final response to the re-INVITE ") }
            guard (200...299).contains(r.statusCode ?? 0) else { return .failed("the re-INVITE was refused \(r.statusCode ?? 0)") }
            guard (try? r.cseq().sequence) == call.cseq - 1 else { return .failed("the 2xx does not carry the re-INVITE's CSeq") }
            return .passed
        },
        ConformanceTestCase(name: "2xx-retransmission", etsiPurpose: nil,
                            summary: "with the ACK held back 2.6 s, the 2xx to INVITE is retransmitted at T1 and then 2·T1 later (0.5 s, then 1 s), as the checker judges",
                            reference: "RFC 3261 §13.3.1.4, §17.2.1",
                            purposeNote: "ETSI's TE_CE_TI_009…012 cite §13.3.1.4; \(unverified)", role: .uac) { s in
            var call = PlacedCall(s)
            guard let final = await call.establish(ackDelay: .milliseconds(2600)), (200...299).contains(final.statusCode ?? 0) else {
                return .inconclusive("the call was not answered 2xx, so there is no 2xx to retransmit")
            }
            await s.pause(.milliseconds(600))
            _ = await call.hangUp()
            return .passed   // the rule checker judges the schedule
        },
        ConformanceTestCase(name: "record-route", etsiPurpose: nil,
                            summary: "an INVITE carrying two Record-Route values gets them back, in order, in the 2xx; the call is released",
                            reference: "RFC 3261 §12.1.1", purposeNote: unverified, role: .uac) { s in
            var call = PlacedCall(s)
            let rr = ["Record-Route: <sip:rr1@\(s.hostPort)\(s.uriTransport);lr>", "Record-Route: <sip:rr2@\(s.hostPort)\(s.uriTransport);lr>"]
            guard let final = await call.establish(extra: rr), (200...299).contains(final.statusCode ?? 0) else {
                return .inconclusive("the record-routed INVITE was not answered 2xx")
            }
            call.extra = ["Route: <sip:rr2@\(s.hostPort)\(s.uriTransport);lr>", "Route: <sip:rr1@\(s.hostPort)\(s.uriTransport);lr>"]
            _ = await call.hangUp()
            return .passed   // the rule checker judges the echo
        },
        ConformanceTestCase(name: "cancel-ringing", etsiPurpose: nil,
                            summary: "a CANCEL after a provisional gets 200, and the INVITE ends with 487",
                            reference: "RFC 3261 §9.2", purposeNote: unverified, role: .uac) { s in
            var call = PlacedCall(s)
            call.invite()
            guard let provisional = await s.response(branch: call.inviteBranch, method: .invite, { (101...299).contains($0) }) else {
                return .failed("no response other than 100 to the INVITE")
            }
            if (200...299).contains(provisional.statusCode ?? 0) {
                call.remoteTag = provisional.toTag
                call.ack2xx(provisional)
                _ = await call.hangUp()
                return .inconclusive("the DUT answered at once (no ringing phase), so there was nothing to cancel")
            }
            call.cancel()
            guard let final = await s.finalResponse(branch: call.inviteBranch, method: .invite) else {
                return .failed("no final response to the INVITE after the CANCEL")
            }
            if (200...299).contains(final.statusCode ?? 0) {
                call.remoteTag = final.toTag
                call.ack2xx(final)
                _ = await call.hangUp()
                return .inconclusive("the 2xx crossed the CANCEL (the DUT answered before it arrived)")
            }
            call.ackFailure(final)
            guard let cancelled = await s.finalResponse(branch: call.inviteBranch, method: .cancel, timeout: .milliseconds(500)) else {
                return .failed("no final response to CANCEL")
            }
            guard cancelled.statusCode == 200 else { return .failed("CANCEL answered \(cancelled.statusCode ?? 0), 200 expected") }
            guard final.statusCode == 487 else { return .failed("the cancelled INVITE ended with \(final.statusCode ?? 0), 487 expected") }
            return .passed
        },
        ConformanceTestCase(name: "options", etsiPurpose: nil,
                            summary: "OPTIONS outside a dialog is answered 200 (as an INVITE would be)",
                            reference: "RFC 3261 §11.2", purposeNote: unverified, role: .uac) { s in
            let b = PlacedCall(s).requestOutsideDialog("OPTIONS")
            guard let r = await s.finalResponse(branch: b, method: .options) else { return .failed("no final response to OPTIONS ") }
            guard r.statusCode == 200 else { return .failed("OPTIONS answered \(r.statusCode ?? 0), 200 expected") }
            return .passed
        },
        ConformanceTestCase(name: "bye-unknown-dialog", etsiPurpose: nil,
                            summary: "a BYE matching no dialog is answered 481",
                            reference: "RFC 3261 §15.1.2, §12.2.2", purposeNote: unverified, role: .uac) { s in
            var call = PlacedCall(s)
            call.remoteTag = s.token()
            let b = call.request("BYE")
            guard let r = await s.finalResponse(branch: b, method: .bye) else { return .failed("no final response to the BYE ") }
            guard r.statusCode == 481 else { return .failed("the BYE for no dialog was answered \(r.statusCode ?? 0), 481 expected") }
            return .passed
        },
        ConformanceTestCase(name: "unknown-method", etsiPurpose: nil,
                            summary: "a request with a method the DUT does not know is answered 501 (or 405), with Allow when 405",
                            reference: "RFC 3261 §8.2.1, §21.5.2", purposeNote: unverified, role: .uac) { s in
            let b = PlacedCall(s).requestOutsideDialog("FOOBAR")
            guard let r = await s.finalResponse(branch: b, method: .extension("FOOBAR")) else {
                return .failed("no final response to an unknown method ")
            }
            switch r.statusCode ?? 0 {
            case 501: return .passed
            case 405: return r.values(.allow).isEmpty ? .failed("405 without Allow (RFC 3261 §21.4.6)") : .passed
            case let c: return .failed("an unknown method was answered \(c), 501 (or 405) expected")
            }
        },
        ConformanceTestCase(name: "max-forwards-zero", etsiPurpose: nil,
                            summary: "OPTIONS with Max-Forwards 0 addressed to the DUT itself is answered (a UAS is its final recipient), not dropped",
                            reference: "RFC 3261 §8.2, §16.3 item 2", purposeNote: unverified, role: .uac) { s in
            let b = PlacedCall(s).requestOutsideDialog("OPTIONS") { $0.maxForwards = 0 }
            guard let r = await s.finalResponse(branch: b, method: .options) else { return .failed("no final response to OPTIONS with Max-Forwards 0") }
            switch r.statusCode ?? 0 {
            case 200...299: return .passed
            case 483: return .inconclusive("483: the DUT acts as a proxy for this request (a UA would answer it)")
            case let c: return .failed("OPTIONS with Max-Forwards 0 answered \(c)")
            }
        },
        ConformanceTestCase(name: "missing-call-id", etsiPurpose: nil,
                            summary: "an OPTIONS without Call-ID (a mandatory header) is answered 400 or dropped, and the DUT still answers OPTIONS afterwards",
                            reference: "RFC 3261 §8.1.1, §8.2.2, §21.4.1", purposeNote: unverified, role: .uac) { s in
            let call = PlacedCall(s)
            // Liveness before and after: a well-formed OPTIONS.
            func alive() async -> Bool {
                let b = call.requestOutsideDialog("OPTIONS")
                return await s.finalResponse(branch: b, method: .options) != nil
            }
            guard await alive() else { return .inconclusive("the DUT does not answer OPTIONS, so its liveness cannot be checked") }
            let b = call.requestOutsideDialog("OPTIONS") { $0.omit = ["call-id"] }
            let bad = await s.waitFor(timeout: .seconds(1)) { m in !m.isRequest && m.topViaBranch == b && (m.statusCode ?? 0) >= 200 }?.0
            guard await alive() else { return .failed("the DUT no longer answers OPTIONS after a request without Call-ID") }
            if let bad, bad.statusCode != 400 { return .failed("a request without Call-ID was answered \(bad.statusCode ?? 0), 400 expected") }
            return .passed
        },
    ] + uasExtensions
}
