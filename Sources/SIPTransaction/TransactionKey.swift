import SIPMessage

/// Identifies a transaction inside a ``TransactionLayer``.
public struct TransactionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "tx\(rawValue)" }

    /// The slot of the layer's table that holds the transaction (the low 32 bits; the high
    /// 32 are a sequence number): tables that follow the layer's are indexed by it.
    @inlinable package var slot: Int { Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: rawValue)) }

    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The tables of the runtime look transactions up by id several times a message. Ids are
    /// handed out by the layer in sequence (no peer chooses them), so a multiply-and-fold of the
    /// number spreads them over the buckets as well as SipHash does, for a fraction of its cost.
    public func _rawHashValue(seed: Int) -> Int { sequentialHash(rawValue, seed: seed) }
}

/// The hash of a number handed out in sequence by its owner (a transaction id, a timer handle),
/// for a table's `_rawHashValue(seed:)`: nobody else chooses these numbers, so a multiply-and-
/// fold spreads them over the buckets as well as SipHash does, for a fraction of its cost.
package func sequentialHash(_ value: UInt64, seed: Int) -> Int {
    let x = (value ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
    return Int(truncatingIfNeeded: x ^ (x >> 32))
}

/// A key's hash, computed once when the key is made: the tables hash a key on every look-up,
/// insertion and removal, and a key's bytes (a branch, a Call-ID) come from the peer, so they
/// are hashed with the process's seeded `Hasher` (SipHash, which resists chosen collisions)
/// exactly once, and the tables reuse the result.
@usableFromInline
protocol PrehashedKey: Hashable {
    var hashWord: Int { get }
}

extension PrehashedKey {
    /// The seeded hash of `bytes`, made once when a key is built.
    static func hashWord(of bytes: ArraySlice<UInt8>) -> Int {
        var h = Hasher()
        bytes.withUnsafeBytes { h.combine(bytes: $0) }
        return h.finalize()
    }

    @usableFromInline
    func hash(into hasher: inout Hasher) { hasher.combine(hashWord) }

    /// The stored hash with the table's seed folded in (the hash is already seeded SipHash).
    @usableFromInline
    func _rawHashValue(seed: Int) -> Int { hashWord ^ seed }
}

/// RFC 3261 §17.1.3: a response matches a client transaction by the top Via branch and the
/// CSeq method.
@usableFromInline
struct ClientKey: PrehashedKey, Sendable {
    var branch: String
    var method: SIPMethod
    @usableFromInline let hashWord: Int

    init(branch: ArraySlice<UInt8>, method: SIPMethod) {
        self.branch = String(decoding: branch, as: UTF8.self)
        self.method = method
        hashWord = Self.hashWord(of: branch)
    }

    @usableFromInline
    init?(response: SIPMessage) {
        guard let b = response.topViaBranchBytes, let cs = try? response.cseq() else { return nil }
        self.init(branch: b, method: cs.method)
    }

    @usableFromInline
    init?(request: SIPMessage) {
        guard let b = request.topViaBranchBytes, let m = request.method else { return nil }
        self.init(branch: b, method: m == .ack ? .invite : m)
    }

    @usableFromInline
    static func == (a: ClientKey, b: ClientKey) -> Bool {
        a.hashWord == b.hashWord && a.branch == b.branch && a.method == b.method
    }
}

/// RFC 3261 §17.2.3: a request matches a server transaction by the top Via branch (with the
/// magic cookie), its sent-by, and the method (ACK matching INVITE); requests from RFC 2543
/// elements, whose branch lacks the cookie, match on Request-URI, From tag, Call-ID, CSeq
/// number, the top Via and the method.
///
/// The key is hashed once, from the bytes: by the branch (for an RFC 2543 request the Call-ID and CSeq number), which is
/// what tells transactions apart in practice; equal keys still hash equally, and the sent-by,
/// the method and the other fields are compared on a bucket hit.
@usableFromInline
struct ServerKey: PrehashedKey, Sendable {
    @usableFromInline
    enum Kind: Hashable, Sendable {
        /// The branch and the sent-by in one byte array (one allocation, no UTF-8 check), a
        /// space between them: the branch, a token, holds none, so the first space splits the two.
        case rfc3261(branchAndSentBy: [UInt8])
        indirect case rfc2543(requestURI: String, fromTag: String, callID: String, cseq: UInt32, via: String)
    }

    var kind: Kind
    var method: SIPMethod
    @usableFromInline let hashWord: Int

    /// An RFC 3261 key from the branch bytes and the sent-by's host bytes and port (the host
    /// lower-cased here, as the decoded path writes it:
    /// `via.host.address.lowercased() + ":" + port`).
    init(branch: ArraySlice<UInt8>, host: ArraySlice<UInt8>, port: UInt16, method: SIPMethod) {
        self.init(branch: branch, joined: ServerKey.join(branch, host, port), method: method)
    }

    /// An RFC 3261 key from decoded text (the decoded path, and tests); `sentBy` is
    /// `host:port` with the host in lower case.
    static func rfc3261(branch: String, sentBy: String, method: SIPMethod) -> ServerKey {
        ServerKey(branch: ArraySlice(branch.utf8), joined: Array((branch + " " + sentBy).utf8), method: method)
    }

    /// `joined` is `branch host:port` (see ``Kind/rfc3261(branchAndSentBy:)``).
    private init(branch: ArraySlice<UInt8>, joined: [UInt8], method: SIPMethod) {
        kind = .rfc3261(branchAndSentBy: joined)
        self.method = method
        hashWord = Self.hashWord(of: branch)
    }

    init(rfc2543 requestURI: String, fromTag: String, callID: String, cseq: UInt32, via: String, method: SIPMethod) {
        kind = .rfc2543(requestURI: requestURI, fromTag: fromTag, callID: callID, cseq: cseq, via: via)
        self.method = method
        var h = Hasher()
        h.combine(callID)
        h.combine(cseq)
        hashWord = h.finalize()
    }

    /// The key of `request`; `asMethod` overrides the method (a CANCEL looking for its INVITE);
    /// `top` is the request's ``SIPMessage/topViaParts`` when the caller has them.
    @usableFromInline
    init?(request: SIPMessage, asMethod: SIPMethod? = nil, top known: SIPMessage.TopViaParts? = nil) {
        guard let m = request.method else { return nil }
        let method = asMethod ?? (m == .ack ? .invite : m)
        // The common case read from the bytes, without decoding the Via.
        if let top = known ?? request.topViaParts {
            if let branch = top.branch(in: request), ServerKey.hasMagicCookie(branch) {
                self.init(branch: branch, host: top.host(in: request), port: top.port ?? 0, method: method)
                return
            }
        } else if let branch = request.topViaBranchBytes, ServerKey.hasMagicCookie(branch), let sentBy = request.topViaSentBy {
            self.init(branch: branch, host: sentBy.host, port: sentBy.port ?? 0, method: method)
            return
        }
        guard let via = try? request.topVia() else { return nil }
        if let b = via.branch, b.hasPrefix(Via.magicCookie) {
            self = .rfc3261(branch: b, sentBy: via.host.address.lowercased() + ":" + String(via.port ?? 0), method: method)
        } else {
            guard let uri = request.requestURIText, let id = request.callID, let cs = try? request.cseq() else { return nil }
            var v = via
            v.parameters.remove("received")
            v.parameters.remove("rport")
            self.init(rfc2543: uri, fromTag: request.fromTag ?? "", callID: id, cseq: cs.sequence, via: v.description, method: method)
        }
    }

    @usableFromInline
    static func == (a: ServerKey, b: ServerKey) -> Bool {
        a.hashWord == b.hashWord && a.method == b.method && a.kind == b.kind
    }

    /// Whether a branch starts with RFC 3261's magic cookie, ``Via/magicCookie`` (`z9hG4bK`,
    /// compared case-sensitively, as `hasPrefix` on the decoded branch), on the bytes: written
    /// out here, as reading the string's bytes costs more than the compare (a test holds the
    /// two equal).
    @usableFromInline
    static func hasMagicCookie(_ branch: ArraySlice<UInt8>) -> Bool {
        guard branch.count >= 7 else { return false }
        let i = branch.startIndex
        return branch[i] == 0x7A && branch[i + 1] == 0x39 && branch[i + 2] == 0x68 && branch[i + 3] == 0x47
            && branch[i + 4] == 0x34 && branch[i + 5] == 0x62 && branch[i + 6] == 0x4B
    }

    /// `branch host:port` with the host in lower case, built in one buffer: the host bytes of
    /// a scanned sent-by are ASCII (host characters), so ASCII lower-casing is the same.
    static func join(_ branch: ArraySlice<UInt8>, _ host: ArraySlice<UInt8>, _ port: UInt16) -> [UInt8] {
        // Appended into reserved room: the standard library's uninitialized-capacity initializer
        // looks its storage's metadata up on every call, and a closure would copy the slices.
        var out: [UInt8] = []
        out.reserveCapacity(branch.count + host.count + 7)
        out.append(contentsOf: branch)
        out.append(UInt8(ascii: " "))
        let h = out.count
        out.append(contentsOf: host)
        out.withUnsafeMutableBufferPointer { b in
            for i in h..<b.count where (b[i] &- 0x41) < 26 { b[i] |= 0x20 }
        }
        // ":" and the port's digits, written backwards into six bytes, then appended at once.
        var tail: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0)
        var p = port, n = 0
        withUnsafeMutableBytes(of: &tail) { d in
            repeat { d[5 - n] = UInt8(0x30 + p % 10); p /= 10; n += 1 } while p > 0
            d[5 - n] = UInt8(ascii: ":")
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: d[(5 - n)...]))
        }
        return out
    }
}

/// RFC 3261 §8.2.2.2: a request without a To tag whose From tag, Call-ID and CSeq match an
/// ongoing server transaction, but which does not match that transaction, arrived twice over
/// different paths (a fork loop) and is answered 482. Hashed once by the Call-ID
/// and CSeq number (the From tag and method are compared on a bucket hit).
@usableFromInline
struct MergeKey: PrehashedKey, Sendable {
    /// The From tag and the Call-ID in one byte array (one allocation, no UTF-8 check), a
    /// space between them: the tag, a token, holds none, so the first space splits the two.
    var fromTagAndCallID: [UInt8]
    var cseq: UInt32
    var method: SIPMethod
    @usableFromInline let hashWord: Int

    @usableFromInline
    init?(request: SIPMessage) {
        guard request.toTagBytes == nil, let m = request.method, m != .ack, m != .cancel,
              let ft = request.fromTagBytes, let id = request.callIDBytes, let cs = try? request.cseq() else { return nil }
        var both: [UInt8] = []
        both.reserveCapacity(ft.count + 1 + id.count)
        both.append(contentsOf: ft)
        both.append(UInt8(ascii: " "))
        both.append(contentsOf: id)
        fromTagAndCallID = both
        cseq = cs.sequence
        method = m
        var h = Hasher()
        id.withUnsafeBytes { h.combine(bytes: $0) }
        h.combine(cs.sequence)
        hashWord = h.finalize()
    }

    @usableFromInline
    static func == (a: MergeKey, b: MergeKey) -> Bool {
        a.hashWord == b.hashWord && a.cseq == b.cseq && a.method == b.method && a.fromTagAndCallID == b.fromTagAndCallID
    }
}
