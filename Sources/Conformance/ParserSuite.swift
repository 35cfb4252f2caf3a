import Foundation
import SIPMessage
import NetworkIO

/// A message of RFC 4475 (SIP torture tests) or RFC 5118 (IPv6 torture tests), read in place
/// from the corpus folder.
struct TortureMessage: Sendable {
    enum Kind: Sendable {
        /// A request the DUT may accept or reject.
        case request
        /// A request the RFC says to reject (a 2xx to it that reaches the runner is a failure).
        case mustReject
        /// A response: the DUT drops it (or handles it as a stray response).
        case response
    }
    var name: String
    /// Relative to the corpus folder.
    var path: String
    var section: String
    var title: String
    var kind: Kind
}

/// The `parser` suite: each RFC 4475 / RFC 5118 message is sent to the DUT byte for byte; the
/// DUT may answer or drop it, but must stay alive: it answers an OPTIONS before and after.
enum ParserSuite {
    static let messages: [TortureMessage] = [
        TortureMessage(name: "4475-wsinv", path: "rfc4475/valid/wsinv.dat", section: "RFC 4475 §3.1.1.1", title: "A Short Tortuous INVITE", kind: .request),
        TortureMessage(name: "4475-intmeth", path: "rfc4475/valid/intmeth.dat", section: "RFC 4475 §3.1.1.2", title: "Wide Range of Valid Characters", kind: .request),
        TortureMessage(name: "4475-esc01", path: "rfc4475/valid/esc01.dat", section: "RFC 4475 §3.1.1.3", title: "Valid Use of the % Escaping Mechanism", kind: .request),
        TortureMessage(name: "4475-escnull", path: "rfc4475/valid/escnull.dat", section: "RFC 4475 §3.1.1.4", title: "Escaped Nulls in URIs", kind: .request),
        TortureMessage(name: "4475-esc02", path: "rfc4475/valid/esc02.dat", section: "RFC 4475 §3.1.1.5", title: "Use of % When It Is Not an Escape", kind: .request),
        TortureMessage(name: "4475-lwsdisp", path: "rfc4475/valid/lwsdisp.dat", section: "RFC 4475 §3.1.1.6", title: "Message with No LWS between Display Name and <", kind: .request),
        TortureMessage(name: "4475-longreq", path: "rfc4475/valid/longreq.dat", section: "RFC 4475 §3.1.1.7", title: "Long Values in Header Fields", kind: .request),
        TortureMessage(name: "4475-dblreq", path: "rfc4475/valid/dblreq.dat", section: "RFC 4475 §3.1.1.8", title: "Extra Trailing Octets in a UDP Datagram", kind: .request),
        TortureMessage(name: "4475-semiuri", path: "rfc4475/valid/semiuri.dat", section: "RFC 4475 §3.1.1.9", title: "Semicolon-Separated Parameters in URI User Part", kind: .request),
        TortureMessage(name: "4475-transports", path: "rfc4475/valid/transports.dat", section: "RFC 4475 §3.1.1.10", title: "Varied and Unknown Transport Types", kind: .request),
        TortureMessage(name: "4475-mpart01", path: "rfc4475/valid/mpart01.dat", section: "RFC 4475 §3.1.1.11", title: "Multipart MIME Message", kind: .request),
        TortureMessage(name: "4475-unreason", path: "rfc4475/valid/unreason.dat", section: "RFC 4475 §3.1.1.12", title: "Unusual Reason Phrase", kind: .response),
        TortureMessage(name: "4475-noreason", path: "rfc4475/valid/noreason.dat", section: "RFC 4475 §3.1.1.13", title: "Empty Reason Phrase", kind: .response),
        TortureMessage(name: "4475-badinv01", path: "rfc4475/invalid/badinv01.dat", section: "RFC 4475 §3.1.2.1", title: "Extraneous Header Field Separators", kind: .mustReject),
        TortureMessage(name: "4475-clerr", path: "rfc4475/invalid/clerr.dat", section: "RFC 4475 §3.1.2.2", title: "Content Length Larger Than Message", kind: .mustReject),
        TortureMessage(name: "4475-ncl", path: "rfc4475/invalid/ncl.dat", section: "RFC 4475 §3.1.2.3", title: "Negative Content-Length", kind: .mustReject),
        TortureMessage(name: "4475-scalar02", path: "rfc4475/invalid/scalar02.dat", section: "RFC 4475 §3.1.2.4", title: "Request Scalar Fields with Overlarge Values", kind: .mustReject),
        TortureMessage(name: "4475-scalarlg", path: "rfc4475/invalid/scalarlg.dat", section: "RFC 4475 §3.1.2.5", title: "Response Scalar Fields with Overlarge Values", kind: .response),
        TortureMessage(name: "4475-quotbal", path: "rfc4475/invalid/quotbal.dat", section: "RFC 4475 §3.1.2.6", title: "Unterminated Quoted String in Display Name", kind: .mustReject),
        TortureMessage(name: "4475-ltgtruri", path: "rfc4475/invalid/ltgtruri.dat", section: "RFC 4475 §3.1.2.7", title: "<> Enclosing Request-URI", kind: .mustReject),
        TortureMessage(name: "4475-lwsruri", path: "rfc4475/invalid/lwsruri.dat", section: "RFC 4475 §3.1.2.8", title: "Malformed SIP Request-URI (embedded LWS)", kind: .request),
        TortureMessage(name: "4475-lwsstart", path: "rfc4475/invalid/lwsstart.dat", section: "RFC 4475 §3.1.2.9", title: "Multiple SP Separating Request-Line Elements", kind: .request),
        TortureMessage(name: "4475-trws", path: "rfc4475/invalid/trws.dat", section: "RFC 4475 §3.1.2.10", title: "SP Characters at End of Request-Line", kind: .request),
        TortureMessage(name: "4475-escruri", path: "rfc4475/invalid/escruri.dat", section: "RFC 4475 §3.1.2.11", title: "Escaped Headers in SIP Request-URI", kind: .request),
        TortureMessage(name: "4475-baddate", path: "rfc4475/invalid/baddate.dat", section: "RFC 4475 §3.1.2.12", title: "Invalid Time Zone in Date Header Field", kind: .request),
        TortureMessage(name: "4475-regbadct", path: "rfc4475/invalid/regbadct.dat", section: "RFC 4475 §3.1.2.13", title: "Failure to Enclose name-addr URI in <>", kind: .mustReject),
        TortureMessage(name: "4475-badaspec", path: "rfc4475/invalid/badaspec.dat", section: "RFC 4475 §3.1.2.14", title: "Spaces within addr-spec", kind: .request),
        TortureMessage(name: "4475-baddn", path: "rfc4475/invalid/baddn.dat", section: "RFC 4475 §3.1.2.15", title: "Non-token Characters in Display Name", kind: .mustReject),
        TortureMessage(name: "4475-badvers", path: "rfc4475/invalid/badvers.dat", section: "RFC 4475 §3.1.2.16", title: "Unknown Protocol Version", kind: .mustReject),
        TortureMessage(name: "4475-mismatch01", path: "rfc4475/invalid/mismatch01.dat", section: "RFC 4475 §3.1.2.17", title: "Start Line and CSeq Method Mismatch", kind: .mustReject),
        TortureMessage(name: "4475-mismatch02", path: "rfc4475/invalid/mismatch02.dat", section: "RFC 4475 §3.1.2.18", title: "Unknown Method with CSeq Method Mismatch", kind: .mustReject),
        TortureMessage(name: "4475-bigcode", path: "rfc4475/invalid/bigcode.dat", section: "RFC 4475 §3.1.2.19", title: "Overlarge Response Code", kind: .response),
        TortureMessage(name: "4475-badbranch", path: "rfc4475/transaction/badbranch.dat", section: "RFC 4475 §3.2.1", title: "Missing Transaction Identifier", kind: .request),
        TortureMessage(name: "4475-insuf", path: "rfc4475/application/insuf.dat", section: "RFC 4475 §3.3.1", title: "Missing Required Header Fields", kind: .request),
        TortureMessage(name: "4475-unkscm", path: "rfc4475/application/unkscm.dat", section: "RFC 4475 §3.3.2", title: "Request-URI with Unknown Scheme", kind: .request),
        TortureMessage(name: "4475-novelsc", path: "rfc4475/application/novelsc.dat", section: "RFC 4475 §3.3.3", title: "Request-URI with Known but Atypical Scheme", kind: .request),
        TortureMessage(name: "4475-unksm2", path: "rfc4475/application/unksm2.dat", section: "RFC 4475 §3.3.4", title: "Unknown URI Schemes in Header Fields", kind: .request),
        TortureMessage(name: "4475-bext01", path: "rfc4475/application/bext01.dat", section: "RFC 4475 §3.3.5", title: "Proxy-Require and Require", kind: .request),
        TortureMessage(name: "4475-invut", path: "rfc4475/application/invut.dat", section: "RFC 4475 §3.3.6", title: "Unknown Content-Type", kind: .request),
        TortureMessage(name: "4475-regaut01", path: "rfc4475/application/regaut01.dat", section: "RFC 4475 §3.3.7", title: "Unknown Authorization Scheme", kind: .request),
        TortureMessage(name: "4475-multi01", path: "rfc4475/application/multi01.dat", section: "RFC 4475 §3.3.8", title: "Multiple Values in Single Value Required Fields", kind: .request),
        TortureMessage(name: "4475-mcl01", path: "rfc4475/application/mcl01.dat", section: "RFC 4475 §3.3.9", title: "Multiple Content-Length Values", kind: .request),
        TortureMessage(name: "4475-bcast", path: "rfc4475/application/bcast.dat", section: "RFC 4475 §3.3.10", title: "200 OK Response with Broadcast Via Header Field Value", kind: .response),
        TortureMessage(name: "4475-zeromf", path: "rfc4475/application/zeromf.dat", section: "RFC 4475 §3.3.11", title: "Max-Forwards of Zero", kind: .request),
        TortureMessage(name: "4475-cparam01", path: "rfc4475/application/cparam01.dat", section: "RFC 4475 §3.3.12", title: "REGISTER with a Contact Header Parameter", kind: .request),
        TortureMessage(name: "4475-cparam02", path: "rfc4475/application/cparam02.dat", section: "RFC 4475 §3.3.13", title: "REGISTER with a url-parameter", kind: .request),
        TortureMessage(name: "4475-regescrt", path: "rfc4475/application/regescrt.dat", section: "RFC 4475 §3.3.14", title: "REGISTER with a URL Escaped Header", kind: .request),
        TortureMessage(name: "4475-sdp01", path: "rfc4475/application/sdp01.dat", section: "RFC 4475 §3.3.15", title: "Unacceptable Accept Offering", kind: .request),
        TortureMessage(name: "4475-inv2543", path: "rfc4475/backward/inv2543.dat", section: "RFC 4475 §3.4.1", title: "INVITE with RFC 2543 Syntax", kind: .request),
        TortureMessage(name: "5118-ipv6-good", path: "rfc5118/valid/ipv6-good", section: "RFC 5118 §4.1", title: "IPv6 reference in R-URI/Via/Contact", kind: .request),
        TortureMessage(name: "5118-ipv6-bad", path: "rfc5118/invalid/ipv6-bad", section: "RFC 5118 §4.2", title: "IPv6 address in Request-URI without brackets", kind: .mustReject),
        TortureMessage(name: "5118-port-ambiguous", path: "rfc5118/valid/port-ambiguous", section: "RFC 5118 §4.3", title: "[2001:db8::10:5070] is an address, no port", kind: .request),
        TortureMessage(name: "5118-port-unambiguous", path: "rfc5118/valid/port-unambiguous", section: "RFC 5118 §4.4", title: "[2001:db8::10]:5070 = address + port 5070", kind: .request),
        TortureMessage(name: "5118-via-received-param-with-delim", path: "rfc5118/valid/via-received-param-with-delim", section: "RFC 5118 §4.5", title: "received=[2001:db8::9:255]", kind: .request),
        TortureMessage(name: "5118-via-received-param-no-delim", path: "rfc5118/valid/via-received-param-no-delim", section: "RFC 5118 §4.5", title: "received=2001:db8::9:255", kind: .request),
        TortureMessage(name: "5118-ipv6-in-sdp", path: "rfc5118/valid/ipv6-in-sdp", section: "RFC 5118 §4.6", title: "IP6 in SDP o=/c=", kind: .request),
        TortureMessage(name: "5118-mult-ip-in-header", path: "rfc5118/valid/mult-ip-in-header", section: "RFC 5118 §4.7", title: "mixed IPv4/IPv6 Via list", kind: .request),
        TortureMessage(name: "5118-mult-ip-in-sdp", path: "rfc5118/valid/mult-ip-in-sdp", section: "RFC 5118 §4.8", title: "IPv4 audio + IPv6 video", kind: .request),
        TortureMessage(name: "5118-ipv4-mapped-ipv6", path: "rfc5118/valid/ipv4-mapped-ipv6", section: "RFC 5118 §4.9", title: "::ffff:192.0.2.2 forms", kind: .request),
        TortureMessage(name: "5118-ipv6-correct-abnf-2-colons", path: "rfc5118/valid/ipv6-correct-abnf-2-colons", section: "RFC 5118 §4.10", title: "correct form", kind: .request),
        TortureMessage(name: "5118-ipv6-bug-abnf-3-colons", path: "rfc5118/valid/ipv6-bug-abnf-3-colons", section: "RFC 5118 §4.10", title: "three colons before an IPv4 tail (the RFC 3261 ABNF bug RFC 5954 fixes)", kind: .request),
    ]

    /// The corpus path of the test `name`.
    static func path(of name: String) -> String? { messages.first { $0.name == name }?.path }

    /// Sends a well-formed OPTIONS and waits for any final response (liveness), retransmitting
    /// it as a UAC does over UDP (RFC 3261 §17.1.2.2: T1, then doubling), for `patience` at
    /// least: a DUT briefly busy, or a datagram lost, is not a dead DUT.
    static func alive(_ s: ConformanceSession, patience: Duration = .zero) async -> Bool {
        let call = PlacedCall(s)
        let b = s.branch()
        let text = call.draft("OPTIONS", branch: b, inDialog: false).text(s)
        let deadline = MonotonicClock.Instant.now + max(patience, s.responseTimeout)
        var interval = s.t1
        s.send(text)
        while true {
            let left = MonotonicClock.Instant.now.duration(to: deadline)
            if left <= .zero { return false }
            if await s.finalResponse(branch: b, method: .options, timeout: min(interval, left)) != nil { return true }
            if MonotonicClock.Instant.now >= deadline { return false }
            s.send(text)
            interval = min(interval * 2, s.t2)
        }
    }

    static func test(_ t: TortureMessage) -> ConformanceTestCase {
        let what: String
        switch t.kind {
        case .request: what = "the request is answered or dropped"
        case .mustReject: what = "the request is rejected (4xx/5xx) or dropped, never accepted"
        case .response: what = "the response is dropped"
        }
        var test = ConformanceTestCase(name: t.name, etsiPurpose: nil,
                                   summary: "\(t.title): \(what), and the DUT still answers OPTIONS afterwards",
                                   reference: t.section, purposeNote: "no ETSI TS 102 027-2 identifier: none was matched to the RFC 4475/5118 messages (no candidates were looked for)", role: .uac) { s in
            guard let corpus = s.corpus, let data = FileManager.default.contents(atPath: corpus + "/" + t.path) else {
                return .failed("cannot read \(s.corpus ?? "(no corpus)")/\(t.path)")
            }
            guard await alive(s) else { return .inconclusive("the DUT does not answer OPTIONS before the message, so its liveness cannot be checked") }
            let before = s.entries.count
            s.sendRaw([UInt8](data), judged: false)
            // Whatever the DUT sends back to the runner comes within this; most answers go to
            // the message's own Via (RFC 3261 §18.2.2), elsewhere.
            await s.pause(.milliseconds(100))
            let answers = s.entries[before...].filter { $0.direction == .received }.compactMap(\.message).filter { !$0.isRequest }
            guard await alive(s, patience: .seconds(4)) else {
                return .failed("the DUT no longer answers OPTIONS after \(t.path) (\(t.section), \(t.title)): it must answer or drop a message, never stop")
            }
            if t.kind == .mustReject, let ok = answers.first(where: { (200...299).contains($0.statusCode ?? 0) && (try? $0.cseq().method) != .options }) {
                return .failed("\(t.path) was accepted with \(ok.statusCode ?? 0) (\(t.section): it is to be rejected)")
            }
            return .passed
        }
        // The scenario ends with a liveness answer: there is nothing late to wait for.
        test.settle = .milliseconds(20)
        return test
    }

    static let tests: [ConformanceTestCase] = messages.map(test)
}
