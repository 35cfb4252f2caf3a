import Foundation
import Testing
@testable import SIPMessage

/// The shared third-party corpora (`../shared/corpora`). Without the folder these tests are
/// skipped and say so; under CI (where the folder always exists) a missing folder fails.
@Suite("Third-party corpora", .enabled(if: Paths.corporaAvailable || Paths.isCI, "../shared/corpora is absent: corpus tests skipped"),
       .requiresCorpus("rfc4475/EXPECTATIONS.tsv"))
struct CorpusTests {
    enum Verdict: Equatable, CustomStringConvertible {
        /// Parses and validates.
        case accept
        /// Parsing (framing, start line, header lines) fails with this rule.
        case parseError(SIPParseError.Rule)
        /// Parsing succeeds; ``SIPMessage/validate()`` fails with this rule.
        case invalid(SIPParseError.Rule)
        var description: String {
            switch self {
            case .accept: return "accept"
            case .parseError(let r): return "parse error \(r)"
            case .invalid(let r): return "invalid \(r)"
            }
        }
    }

    /// Our verdict for every RFC 4475 message. Where the RFC leaves a choice ("MAY REJECT",
    /// "liberal inference allowed") the policy is written here and in docs/ARCHITECTURE.md.
    static let rfc4475: [String: Verdict] = [
        "valid/wsinv.dat": .accept, "valid/intmeth.dat": .accept, "valid/esc01.dat": .accept,
        "valid/escnull.dat": .accept, "valid/esc02.dat": .accept, "valid/lwsdisp.dat": .accept,
        "valid/longreq.dat": .accept, "valid/dblreq.dat": .accept, "valid/semiuri.dat": .accept,
        "valid/transports.dat": .accept, "valid/mpart01.dat": .accept, "valid/unreason.dat": .accept,
        "valid/noreason.dat": .accept,
        "invalid/badinv01.dat": .invalid(.parameter),
        "invalid/clerr.dat": .parseError(.bodyTruncated),
        "invalid/ncl.dat": .parseError(.contentLength),
        "invalid/scalar02.dat": .invalid(.cseq),
        "invalid/scalarlg.dat": .invalid(.cseq),
        "invalid/quotbal.dat": .invalid(.quotedString),
        "invalid/ltgtruri.dat": .invalid(.uri),
        "invalid/lwsruri.dat": .parseError(.requestLine),
        "invalid/lwsstart.dat": .parseError(.requestLine),   // MAY REJECT: we are strict on the start line
        "invalid/trws.dat": .parseError(.requestLine),       // MAY REJECT: likewise
        "invalid/escruri.dat": .invalid(.uri),               // MAY REJECT: headers are not allowed in a Request-URI
        "invalid/baddate.dat": .accept,                      // MAY REJECT: Date is not used, so not judged
        "invalid/regbadct.dat": .invalid(.nameAddress),
        "invalid/badaspec.dat": .invalid(.nameAddress),
        "invalid/baddn.dat": .invalid(.nameAddress),
        "invalid/badvers.dat": .invalid(.unsupportedVersion),
        "invalid/mismatch01.dat": .invalid(.cseqMethodMismatch),
        "invalid/mismatch02.dat": .invalid(.cseqMethodMismatch),
        "invalid/bigcode.dat": .parseError(.statusCode),
        "transaction/badbranch.dat": .accept,
        "application/insuf.dat": .invalid(.missingHeader),
        "application/unkscm.dat": .accept, "application/novelsc.dat": .accept, "application/unksm2.dat": .accept,
        "application/bext01.dat": .accept, "application/invut.dat": .accept, "application/regaut01.dat": .accept,
        "application/multi01.dat": .invalid(.duplicateHeader),
        "application/mcl01.dat": .parseError(.duplicateContentLength),
        "application/bcast.dat": .accept, "application/zeromf.dat": .accept, "application/cparam01.dat": .accept,
        "application/cparam02.dat": .accept, "application/regescrt.dat": .accept, "application/sdp01.dat": .accept,
        "backward/inv2543.dat": .accept,
    ]

    static func verdict(_ bytes: [UInt8]) -> (Verdict, SIPMessage?) {
        let m: SIPMessage
        do { m = try SIPMessage(bytes: bytes) } catch { return (.parseError(error.rule), nil) }
        do { try m.validate() } catch { return (.invalid(error.rule), m) }
        return (.accept, m)
    }

    static func tsvRows(_ name: String) throws -> [[String]] {
        let text = try #require(readBytes(Paths.corpora + "/" + name).map { String(decoding: $0, as: UTF8.self) })
        return text.split(separator: "\n").dropFirst().map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    @Test func rfc4475EveryFileGetsItsVerdict() throws {
        #expect(Paths.corporaAvailable, "../shared/corpora must exist in CI")
        let rows = try Self.tsvRows("rfc4475/EXPECTATIONS.tsv")
        #expect(rows.count == 49)
        var seen = Set<String>()
        for row in rows {
            let path = row[1], expected = row[4]
            let key = String(path.dropFirst("rfc4475/".count))
            seen.insert(key)
            let ours = try #require(Self.rfc4475[key], "no verdict written for \(key)")
            let bytes = try #require(readBytes(Paths.corpora + "/" + path))
            let (got, message) = Self.verdict(bytes)
            #expect(got == ours, "\(key): expected \(ours), got \(got)")
            // Our verdict must agree with the RFC's.
            let upper = expected.uppercased()
            if upper.hasPrefix("ACCEPT") || upper.hasPrefix("PARSE") {
                if case .parseError = ours { Issue.record("\(key): RFC says \(expected) but we reject at parse") }
                if case .invalid = ours { #expect(upper.contains("400"), "\(key): RFC says \(expected)") }
            } else if upper.hasPrefix("REJECT") || upper.hasPrefix("DROP") || upper.hasPrefix("DISCARD") {
                #expect(ours != .accept, "\(key): RFC says \(expected)")
            }
            if let m = message {
                #expect(m.serialized().count <= bytes.count)
                #expect(bytes.starts(with: m.serialized()), "\(key): pristine serialization differs")
                // The canonical form re-parses to the same verdict.
                if got == .accept { #expect(Self.verdict(m.serializedCanonically()).0 == .accept, "\(key) canonical form") }
            }
        }
        #expect(seen == Set(Self.rfc4475.keys))
    }

    @Test func rfc4475Details() throws {
        func load(_ p: String) throws -> SIPMessage { try SIPMessage(bytes: try #require(readBytes(Paths.corpora + "/rfc4475/" + p))) }
        let dbl = try load("valid/dblreq.dat")
        #expect(dbl.method == .register)
        #expect(dbl.body.isEmpty)
        let semi = try load("valid/semiuri.dat")
        #expect(try semi.requestURI().sipURI?.user == "user;par=u@example.net")
        let null = try load("valid/escnull.dat")
        #expect(try null.to().sipURI?.user == "null-\u{0}-null")
        let mp = try load("valid/mpart01.dat")
        let parts = try #require(try mp.multipartParts())
        #expect(parts.count == 2)
        #expect(parts[1].body.contains(0))
        let ws = try load("valid/wsinv.dat")
        #expect(try ws.to().tag == "1918181833n")
        #expect(try ws.from().displayName == "J Rosenberg \\\"")
        #expect(try ws.contact()?.addresses.first?.parameters["newparam"] == .some("newvalue"))
        let cp1 = try load("application/cparam01.dat")
        let c1 = try #require(try cp1.contact()?.addresses.first)
        #expect(c1.parameters.contains("unknownparam") && !(c1.sipURI?.parameters.contains("unknownparam") ?? true))
        let cp2 = try load("application/cparam02.dat")
        let c2 = try #require(try cp2.contact()?.addresses.first)
        #expect(c2.sipURI?.parameters.contains("unknownparam") == true)
        let re = try load("application/regescrt.dat")
        #expect(try re.contact()?.addresses.first?.sipURI?.header("Route") == "<sip:sip.example.com>")
        let zero = try load("application/zeromf.dat")
        #expect(try zero.maxForwards() == 0)
        let old = try load("backward/inv2543.dat")
        #expect(old.topViaBranch == nil)
        #expect(old.fromTag == nil)
        let unk = try load("application/unkscm.dat")
        #expect(try unk.requestURI().scheme == "nobodyknowsthisscheme")
        let badvers = try #require(readBytes(Paths.corpora + "/rfc4475/invalid/badvers.dat"))
        let e = try SIPMessage(bytes: badvers)
        #expect(throws: SIPParseError.self) { try e.validate() }
        do { try e.validate() } catch { #expect(error.suggestedStatusCode == 505) }
    }

    @Test func rfc5118IPv6() throws {
        #expect(Paths.corporaAvailable, "../shared/corpora must exist in CI")
        let rows = try Self.tsvRows("rfc5118/EXPECTATIONS.tsv")
        #expect(rows.count == 12)
        for row in rows {
            let bytes = try #require(readBytes(Paths.corpora + "/" + row[1]))
            let (got, _) = Self.verdict(bytes)
            if row[2].hasPrefix("REJECT") {
                #expect(got == .invalid(.host), "\(row[1]): \(got)")
            } else {
                #expect(got == .accept, "\(row[1]): \(got)")
            }
        }
        func load(_ p: String) throws -> SIPMessage { try SIPMessage(bytes: try #require(readBytes(Paths.corpora + "/rfc5118/valid/" + p))) }
        let amb = try load("port-ambiguous").requestURI().sipURI
        #expect(amb?.host == .ipv6("2001:db8::10:5070") && amb?.port == nil)
        let un = try load("port-unambiguous").requestURI().sipURI
        #expect(un?.host == .ipv6("2001:db8::10") && un?.port == 5070)
        #expect(try load("via-received-param-with-delim").topVia().received == "[2001:db8::9:255]")
        #expect(try load("via-received-param-no-delim").topVia().received == "2001:db8::9:255")
        let vias = try load("mult-ip-in-header").via()
        #expect(vias.count >= 2)
        #expect(vias.contains { if case .ipv6 = $0.host { return true } else { return false } })
        #expect(vias.contains { if case .ipv4 = $0.host { return true } else { return false } })
        #expect(try load("ipv6-bug-abnf-3-colons").requestURI().sipURI?.host == .ipv6("2001:db8:::192.0.2.1"))
        #expect(try load("ipv6-good").requestURI().sipURI?.host == .ipv6("2001:db8::10"))
    }

    struct SplitterCase {
        var messages: [[UInt8]]
        var discards: [[UInt8]]
    }

    static func splitterCase(_ name: String) throws -> SplitterCase {
        let data = try #require(readBytes(Paths.corpora + "/sip-capture-sipsplitter/" + name + ".expected"))
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(data)) as? [String: Any])
        let msgs = try #require(obj["Messages"] as? [String]).map { Array($0.utf8) }
        let disc = try #require(obj["Discards"] as? [String]).map { Array($0.utf8) }
        return SplitterCase(messages: msgs, discards: disc)
    }

    static let splitterNames: [String] = listDirectory(Paths.corpora + "/sip-capture-sipsplitter").filter { $0.hasSuffix(".stream") }.map { String($0.dropLast(7)) }

    func frame(_ stream: [UInt8], chunk: Int, mode: SIPStreamFramer.Mode) throws -> SplitterCase {
        var f = SIPStreamFramer(mode: mode)
        var out = SplitterCase(messages: [], discards: [])
        var i = 0
        repeat {
            let j = min(stream.count, i + chunk)
            f.append(stream[i..<j])
            i = j
            while let e = try f.next() {
                switch e {
                case .message(let m): out.messages.append(m.serialized())
                case .discarded(let b, _): out.discards.append(b)
                case .keepAlivePing, .keepAlivePong: break
                }
            }
        } while i < stream.count
        return out
    }

    @Test func sipsplitterStreamsFrameIntoTheirExpectedMessages() throws {
        #expect(Paths.corporaAvailable, "../shared/corpora must exist in CI")
        #expect(Self.splitterNames.count == 18)
        for name in Self.splitterNames {
            let stream = try #require(readBytes(Paths.corpora + "/sip-capture-sipsplitter/" + name + ".stream"))
            let want = try Self.splitterCase(name)
            for chunk in [stream.count + 1, 1, 7] {
                let got = try frame(stream, chunk: chunk, mode: .resynchronizing)
                #expect(got.messages == want.messages, "\(name) chunk \(chunk): messages")
                #expect(got.discards == want.discards, "\(name) chunk \(chunk): discards")
            }
            // A live connection (strict) yields the same messages when nothing is discarded,
            // and fails with a typed error when something must be.
            var f = SIPStreamFramer(mode: .strict)
            f.append(stream)
            var framed: [[UInt8]] = []
            var failure: SIPParseError?
            do { while let e = try f.next() { if case .message(let m) = e { framed.append(m.serialized()) } } } catch { failure = error }
            if want.discards.isEmpty && failure == nil {
                #expect(framed == want.messages, "\(name): strict messages")
            } else {
                // Up to the failure, strict framing yields the expected messages in order.
                #expect(failure != nil, "\(name): strict framing should have failed")
                #expect(want.messages.starts(with: framed), "\(name): strict messages before the failure")
            }
            // Streams that only wait for more bytes, and streams with junk, are told apart.
            if failure == nil { #expect(want.discards.isEmpty) }
        }
    }
}
