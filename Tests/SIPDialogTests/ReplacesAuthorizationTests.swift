import Testing
import SIPMessage
@testable import SIPDialog

/// RFC 3891 §6: who may replace a dialog, by default.
@Suite("Replaces authorization (RFC 3891 §6)")
struct ReplacesAuthorizationTests {
    static func invite(from: String, referredBy: String?) throws -> SIPMessage {
        var m = try SIPMessage(method: .invite, uri: try SIPURI("sip:carol@192.0.2.3"))
        try m.append(.via, "SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKi1")
        try m.append(.from, "\(from);tag=f1")
        try m.append(.to, "<sip:carol@c.example>")
        try m.append(.callID, "new@b")
        try m.append(.cseq, "1 INVITE")
        try m.append(.replaces, "old@a;to-tag=c1;from-tag=a1")
        if let r = referredBy { try m.append(.referredBy, r) }
        return try SIPMessage(bytes: m.serialized())
    }

    /// The replaced dialog's peer is alice: `sip:alice@a.example`, Contact `sip:alice@192.0.2.1:5070`.
    static let cases: [(from: String, referredBy: String?, grounds: ReplacesAuthorization.Grounds?, why: String)] = [
        ("<sip:bob@b.example>", "<sip:alice@a.example>", .referredByPeer, "attended transfer: the peer referred bob"),
        ("<sip:bob@b.example>", "\"Alice\" <sip:alice@A.EXAMPLE:5080;transport=tcp>", .referredByPeer, "port, parameters, host case ignored"),
        ("<sip:bob@b.example>", "<sip:alice@192.0.2.1>", .referredByPeer, "Referred-By names the peer's Contact"),
        ("<sip:alice@a.example>", nil, .fromPeer, "the peer itself moves its call"),
        ("<sip:alice@192.0.2.1:5999>", nil, .fromPeer, "From the peer's device"),
        ("<sip:bob@b.example>", nil, nil, "a stranger, nobody referred it"),
        ("<sip:bob@b.example>", "<sip:mallory@a.example>", nil, "referred by someone else"),
        ("<sip:bob@b.example>", "<sip:Alice@a.example>", nil, "the user part is case-sensitive"),
        ("<sip:bob@b.example>", "<sip:a.example>", nil, "no user part"),
        ("<sip:bob@b.example>", "<tel:+15551234>", nil, "a tel: URI is not the sip: peer"),
        ("<sip:bob@b.example>", "not a name-addr <<", nil, "a Referred-By that does not parse grants nothing"),
    ]

    @Test("grounds, each case", arguments: 0..<11)
    func grounds(_ i: Int) throws {
        let c = Self.cases[i]
        let invite = try Self.invite(from: c.from, referredBy: c.referredBy)
        let peer = URI.sip(try SIPURI("sip:alice@a.example")), contact = URI.sip(try SIPURI("sip:alice@192.0.2.1:5070"))
        #expect(ReplacesAuthorization.grounds(for: invite, peer: peer, peerContact: contact) == c.grounds, "\(c.why)")
    }

    @Test("tel: parties compare by their digits")
    func telParties() throws {
        let a = try URI("tel:+1-555-123-4567"), b = try URI("tel:+15551234567"), c = try URI("tel:+15551234568")
        #expect(ReplacesAuthorization.sameParty(a, b))
        #expect(!ReplacesAuthorization.sameParty(a, c))
        #expect(!ReplacesAuthorization.sameParty(try URI("tel:--"), try URI("tel:--")), "no digits names nobody")
    }
}
