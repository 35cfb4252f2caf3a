import SIPMessage

/// Identifies a transaction inside a ``TransactionLayer``.
public struct TransactionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "tx\(rawValue)" }
}

/// RFC 3261 §17.1.3: a response matches a client transaction by the top Via branch and the
/// CSeq method.
@usableFromInline
struct ClientKey: Hashable, Sendable {
    var branch: String
    var method: SIPMethod

    @usableFromInline
    init?(response: SIPMessage) {
        guard let b = response.topViaBranch, let cs = try? response.cseq() else { return nil }
        branch = b
        method = cs.method
    }

    @usableFromInline
    init?(request: SIPMessage) {
        guard let b = request.topViaBranch, let m = request.method else { return nil }
        branch = b
        method = m == .ack ? .invite : m
    }
}

/// RFC 3261 §17.2.3: a request matches a server transaction by the top Via branch (with the
/// magic cookie), its sent-by, and the method (ACK matching INVITE); requests from RFC 2543
/// elements, whose branch lacks the cookie, match on Request-URI, From tag, Call-ID, CSeq
/// number, the top Via and the method.
@usableFromInline
enum ServerKey: Hashable, Sendable {
    case rfc3261(branch: String, sentBy: String, method: SIPMethod)
    case rfc2543(requestURI: String, fromTag: String, callID: String, cseq: UInt32, via: String, method: SIPMethod)

    /// The key of `request`; `asMethod` overrides the method (a CANCEL looking for its INVITE).
    @usableFromInline
    init?(request: SIPMessage, asMethod: SIPMethod? = nil) {
        guard let m = request.method else { return nil }
        let method = asMethod ?? (m == .ack ? .invite : m)
        // The common case read from the bytes, without decoding the Via.
        if let branch = request.topViaBranchBytes, ServerKey.hasMagicCookie(branch), let sentBy = request.topViaSentBy {
            self = .rfc3261(branch: String(decoding: branch, as: UTF8.self), sentBy: ServerKey.sentBy(sentBy.host, sentBy.port ?? 0), method: method)
            return
        }
        guard let via = try? request.topVia() else { return nil }
        if let b = via.branch, b.hasPrefix(Via.magicCookie) {
            let sentBy = via.host.address.lowercased() + ":" + String(via.port ?? 0)
            self = .rfc3261(branch: b, sentBy: sentBy, method: method)
        } else {
            guard let uri = request.requestURIText, let id = request.callID, let cs = try? request.cseq() else { return nil }
            var v = via
            v.parameters.remove("received")
            v.parameters.remove("rport")
            self = .rfc2543(requestURI: uri, fromTag: request.fromTag ?? "", callID: id, cseq: cs.sequence, via: v.description, method: method)
        }
    }

    /// Hashes what tells transactions apart in practice (the branch; for an RFC 2543 request
    /// the Call-ID and CSeq number), not every field: equal keys still hash equally, and the
    /// sent-by, the method and the other strings are compared only on a bucket hit.
    @usableFromInline
    func hash(into hasher: inout Hasher) {
        switch self {
        case .rfc3261(let branch, _, _):
            hasher.combine(branch)
        case .rfc2543(_, _, let callID, let cseq, _, _):
            hasher.combine(callID)
            hasher.combine(cseq)
        }
    }

    /// Whether a branch starts with RFC 3261's magic cookie `z9hG4bK` (case-sensitive, as
    /// `hasPrefix` on the decoded branch), compared on the bytes.
    @usableFromInline
    static func hasMagicCookie(_ branch: ArraySlice<UInt8>) -> Bool {
        guard branch.count >= 7 else { return false }
        let i = branch.startIndex
        return branch[i] == 0x7A && branch[i + 1] == 0x39 && branch[i + 2] == 0x68 && branch[i + 3] == 0x47
            && branch[i + 4] == 0x34 && branch[i + 5] == 0x62 && branch[i + 6] == 0x4B
    }

    /// `host:port` with the host in lower case, as the decoded path writes it
    /// (`via.host.address.lowercased() + ":" + port`), built in one buffer: the host bytes
    /// of a scanned sent-by are ASCII (host characters), so ASCII lower-casing is the same.
    static func sentBy(_ host: ArraySlice<UInt8>, _ port: UInt16) -> String {
        String(unsafeUninitializedCapacity: host.count + 6) { out in
            var n = 0
            for b in host {
                out[n] = (b &- 0x41) < 26 ? b | 0x20 : b
                n += 1
            }
            out[n] = UInt8(ascii: ":")
            n += 1
            var digits = 1, p = Int(port)
            while p >= 10 { p /= 10; digits += 1 }
            p = Int(port)
            for k in stride(from: n + digits - 1, through: n, by: -1) {
                out[k] = UInt8(0x30 + p % 10)
                p /= 10
            }
            return n + digits
        }
    }
}

/// RFC 3261 §8.2.2.2: a request without a To tag whose From tag, Call-ID and CSeq match an
/// ongoing server transaction, but which does not match that transaction, arrived twice over
/// different paths (a fork loop) and is answered 482.
@usableFromInline
struct MergeKey: Hashable, Sendable {
    var fromTag: String
    var callID: String
    var cseq: UInt32
    var method: SIPMethod

    /// Hashes the Call-ID and CSeq number only (the From tag and method are compared on a
    /// bucket hit): equal keys still hash equally.
    @usableFromInline
    func hash(into hasher: inout Hasher) {
        hasher.combine(callID)
        hasher.combine(cseq)
    }

    @usableFromInline
    init?(request: SIPMessage) {
        guard request.toTagBytes == nil, let m = request.method, m != .ack, m != .cancel,
              let ft = request.fromTag, let id = request.callID, let cs = try? request.cseq() else { return nil }
        fromTag = ft
        callID = id
        cseq = cs.sequence
        method = m
    }
}
