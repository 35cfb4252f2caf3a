#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Synchronization
import SIPMessage
import SIPDialog
import SIPTransaction

/// Remembers the SDP answer made for the last offer and reuses it for the next call that sends
/// the same offer, writing only the new call's `o=` session id and version into it: a load
/// generator sends one offer thousands of times, and parsing it, negotiating and serializing
/// the answer each time cost more than the rest of the call's SIP work.
///
/// `make` must be a pure function of the offer and the session id whose answer uses the id
/// only as the `o=` line's session id and version (as ``SDP/OfferAnswer`` does for a fresh
/// engine whose version defaults to the id). The cache checks the part it relies on: an answer
/// whose `o=` line does not carry the id twice is returned as made and not cached. Offers that
/// differ from the last one are answered by `make` (and become the cached one); a `nil` offer
/// (an INVITE without SDP) always goes to `make`.
public final class AnswerTemplateCache: Sendable {
    /// Makes the answer to an offer for a session id (`nil` refuses the offer).
    public typealias Make = @Sendable (SessionBody?, UInt64) -> SessionBody?

    /// The last answer, cut around its `o=` session id and version.
    struct Template {
        var offer: SessionBody
        var contentType: MediaType
        /// The answer up to the session id, between id and version, and after the version.
        var head: ArraySlice<UInt8>
        var middle: ArraySlice<UInt8>
        var tail: ArraySlice<UInt8>
    }

    private let make: Make
    private let last = Mutex<Template?>(nil)
    /// Session ids: a counter from a random start, mixed (SplitMix64). An `o=` session id must
    /// be unique, not secret (RFC 8866 §5.2), and the system generator cost a system call per
    /// call.
    private let nextID = Atomic<UInt64>(UInt64.random(in: 0...UInt64.max))

    /// Wraps `make` (see the type's contract).
    public init(_ make: @escaping Make) {
        self.make = make
    }

    /// The answer to `offer` for a new session id (unique, see `nextID`).
    public func answer(_ offer: SessionBody?) -> SessionBody? {
        answer(offer, sessionID: AnswerTemplateCache.sessionID(nextID.wrappingAdd(1, ordering: .relaxed).newValue))
    }

    /// A session id in 1...Int64.max from a counter's value (mixed by SplitMix64).
    static func sessionID(_ counter: UInt64) -> UInt64 {
        var g = SplitMix64(seed: counter)
        return max(g.next() & UInt64(Int64.max), 1)
    }

    /// The answer to `offer` with `sessionID` as the `o=` id and version: the cached template
    /// when the offer is the last one, else `make`'s answer.
    public func answer(_ offer: SessionBody?, sessionID: UInt64) -> SessionBody? {
        guard let offer else { return make(nil, sessionID) }
        if let t = last.withLock({ t -> Template? in t.flatMap { AnswerTemplateCache.same($0.offer, offer) ? $0 : nil } }) {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(t.head.count + t.middle.count + t.tail.count + 40)
            bytes += t.head
            AnswerTemplateCache.appendDecimal(sessionID, to: &bytes)
            bytes += t.middle
            AnswerTemplateCache.appendDecimal(sessionID, to: &bytes)
            bytes += t.tail
            return SessionBody(contentType: t.contentType, bytes: bytes)
        }
        guard let made = make(offer, sessionID) else { return nil }
        if let t = AnswerTemplateCache.template(of: made, offer: offer, sessionID: sessionID) {
            last.withLock { $0 = t }
        }
        return made
    }

    /// Whether two offers are the same: their bytes first, by one block comparison (the
    /// element-wise `==` of the arrays and media types cost more than the rest of the answer).
    static func same(_ a: SessionBody, _ b: SessionBody) -> Bool {
        guard a.bytes.count == b.bytes.count else { return false }
        let equalBytes = a.bytes.withUnsafeBytes { x in b.bytes.withUnsafeBytes { y in
            x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
        } }
        return equalBytes && a.contentType == b.contentType
    }

    /// Appends `n` in decimal ASCII, written in place.
    static func appendDecimal(_ n: UInt64, to bytes: inout [UInt8]) {
        // Written backwards into a stack buffer (20 digits hold any UInt64), then one append.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var i = 20
            var v = n
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i...]))
        }
    }

    /// `n` in decimal ASCII.
    static func decimal(_ n: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        appendDecimal(n, to: &out)
        return out
    }

    /// Cuts `answer` around the session id and version of its `o=` line (RFC 8866 §5.2:
    /// `o=<username> <sess-id> <sess-version> ...`); `nil` when they are not both `sessionID`.
    static func template(of answer: SessionBody, offer: SessionBody, sessionID: UInt64) -> Template? {
        let b = answer.bytes
        var lineStart = 0
        // The o= line: at the start or after a line feed.
        while lineStart + 1 < b.count, !(b[lineStart] == UInt8(ascii: "o") && b[lineStart + 1] == UInt8(ascii: "=")) {
            guard let lf = b[lineStart...].firstIndex(of: 0x0A) else { return nil }
            lineStart = lf + 1
        }
        guard lineStart + 1 < b.count else { return nil }
        let lineEnd = b[lineStart...].firstIndex(where: { $0 == 0x0D || $0 == 0x0A }) ?? b.count
        // username SP sess-id SP sess-version SP ...
        guard let sp1 = b[(lineStart + 2)..<lineEnd].firstIndex(of: 0x20),
              let sp2 = b[(sp1 + 1)..<lineEnd].firstIndex(of: 0x20),
              let sp3 = b[(sp2 + 1)..<lineEnd].firstIndex(of: 0x20) else { return nil }
        let id = decimal(sessionID)
        guard b[(sp1 + 1)..<sp2].elementsEqual(id), b[(sp2 + 1)..<sp3].elementsEqual(id) else { return nil }
        return Template(offer: offer, contentType: answer.contentType, head: b[..<(sp1 + 1)], middle: b[sp2...sp2],
                        tail: b[sp3...])
    }
}
