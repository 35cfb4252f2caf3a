import Testing
import PacketCapture
import SIPMessage
#if canImport(Glibc)
import Glibc
#endif

/// The summary path: ``SIPDigestScanner`` reads datagrams in place and must agree with
/// ``SIPMessage`` (same acceptance, same errors, same fields) on every input.
@Suite struct DigestTests {
    /// The scanner's digest (or error) for a datagram, and the message path's.
    static func both(_ bytes: [UInt8]) -> (Result<SIPMessageDigest, SIPParseError>, Result<SIPMessageDigest, SIPParseError>) {
        var scanner = SIPDigestScanner()
        // Scanned from a slice in the middle of a larger buffer, as the capture reader lends it.
        let buffer = [UInt8](repeating: 0x41, count: 7) + bytes + [UInt8](repeating: 0x42, count: 5)
        let slice = buffer[7..<(7 + bytes.count)]
        let scanned: Result<SIPMessageDigest, SIPParseError>
        do throws(SIPParseError) { scanned = .success(try scanner.digest(datagram: slice) { _ in true }) } catch { scanned = .failure(error) }
        let parsed: Result<SIPMessageDigest, SIPParseError>
        do throws(SIPParseError) { parsed = .success(SIPMessageDigest(try SIPMessage(bytes: bytes))) } catch { parsed = .failure(error) }
        return (scanned, parsed)
    }

    static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    static let samples: [String] = [
        // Ordinary request and response.
        "INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1:5070;branch=z9hG4bKabc\r\nFrom: <sip:a@x>;tag=1\r\n"
            + "To: <sip:b@x>\r\nCall-ID: c1@x\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n",
        "SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nTo: \"B; tag=no\" <sip:b@x;tag=inuri>;tag=t2\r\nCall-ID: c1@x\r\n"
            + "CSeq: 1 INVITE\r\nRSeq: 7\r\nContent-Length: 0\r\n\r\n",
        // Compact forms, odd case, white space before the colon, a Via list, LF line ends.
        "BYE sip:b@x SIP/2.0\nv : SIP/2.0/UDP h;BRANCH=z9hG4bKUP, SIP/2.0/UDP g;branch=second\ni:  c2@x \nt: <sip:b@x>;Tag=T\nf: a;tag=1\n"
            + "cseq:   42\tBYE  \nl: 0\n\n",
        // Folded Call-ID, To and Via lines.
        "OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/UDP h\r\n ;branch=z9hG4bKfold\r\nCall-ID: \r\n folded@x\r\nTo: <sip:x>\r\n\t;tag=ft\r\n"
            + "CSeq: 3\r\n OPTIONS\r\nContent-Length: 0\r\n\r\n",
        // Malformed CSeq values (the digest has no CSeq), a huge number, an extension method.
        "MESSAGE sip:x SIP/2.0\r\nCall-ID: m\r\nCSeq: 4294967296 MESSAGE\r\n\r\n",
        "MESSAGE sip:x SIP/2.0\r\nCall-ID: m\r\nCSeq: 12MESSAGE\r\n\r\n",
        "MESSAGE sip:x SIP/2.0\r\nCall-ID: m\r\nCSeq: 12 MESSAGE x\r\n\r\n",
        "FOO sip:x SIP/2.0\r\nCall-ID: m\r\nCSeq: 4294967295 FOO\r\n\r\n",
        // Two RSeq lines, a malformed one, RSeq on a final response (ignored), two Call-ID lines.
        "SIP/2.0 183 Session Progress\r\nCall-ID: r\r\nCSeq: 1 INVITE\r\nRSeq: 1\r\nRSeq: 2\r\n\r\n",
        "SIP/2.0 183 Session Progress\r\nCall-ID: r\r\nCSeq: 1 INVITE\r\nRSeq: x1\r\n\r\n",
        "SIP/2.0 200 OK\r\nCall-ID: r\r\nCall-ID: second\r\nCSeq: 1 INVITE\r\nRSeq: 5\r\n\r\n",
        // Empty branch and tag, no Call-ID, a long Call-ID (past the key's inline bytes).
        "SIP/2.0 486 Busy Here\r\nVia: SIP/2.0/UDP h;branch=\r\nTo: <sip:b@x>;tag=\r\nCSeq: 1 INVITE\r\n\r\n",
        "INVITE sip:x SIP/2.0\r\nCall-ID: " + String(repeating: "0123456789", count: 12) + "@long\r\nCSeq: 1 INVITE\r\n\r\n",
        // Refused: bad start line, bare CR, two Content-Lengths, truncated body, no line end.
        "INVITE  sip:x SIP/2.0\r\nCall-ID: a\r\n\r\n",
        "SIP/2.0 99 Too Low\r\nCall-ID: a\r\n\r\n",
        "INVITE sip:x SIP/2.0\r\nCall-ID: a\rb\r\n\r\n",
        "INVITE sip:x SIP/2.0\r\nContent-Length: 0\r\nl: 0\r\n\r\n",
        "INVITE sip:x SIP/2.0\r\nContent-Length: 10\r\n\r\nshort",
        "INVITE sip:x SIP/2.0",
        "\r\n\r\n",
    ]

    @Test(arguments: samples.indices)
    func scannerAgreesWithTheMessage(index: Int) throws {
        let (scanned, parsed) = Self.both(Self.text(Self.samples[index]))
        switch (scanned, parsed) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure(let a), .failure(let b)): #expect(a == b)
        default: Issue.record("sample \(index): scanner \(scanned), message \(parsed)")
        }
    }

    @Test func fieldsAreTheMessagesFields() throws {
        var scanner = SIPDigestScanner()
        let folded = Self.text(Self.samples[3])
        let d = try scanner.digest(datagram: folded[...]) { _ in true }
        let m = try SIPMessage(bytes: folded)
        #expect(d.method == .options && d.statusCode == nil && d.reasonPhrase == nil)
        #expect(d.callID?.bytes == Array("folded@x".utf8))
        #expect(d.cseq == CSeq(3, .options))
        #expect(d.branchHash == SIPMessageDigest.hash64(m.topViaBranchBytes) && d.branchHash != 0)
        #expect(d.hasToTag && d.toTagHash == SIPMessageDigest.hash64(Array("ft".utf8)[...]))

        let compact = try scanner.digest(datagram: Self.text(Self.samples[2])[...]) { _ in true }
        #expect(compact.callID?.string == "c2@x")
        #expect(compact.cseq == CSeq(42, .bye))
        #expect(compact.branchHash == SIPMessageDigest.hash64(Array("z9hG4bKUP".utf8)[...]))
        #expect(compact.toTagHash == SIPMessageDigest.hash64(Array("T".utf8)[...]))

        let ringing = try scanner.digest(datagram: Self.text(Self.samples[1])[...]) { _ in false }
        #expect(ringing.statusCode == 180 && ringing.reasonPhrase == nil && ringing.rseq == 7)
        #expect(ringing.toTagHash == SIPMessageDigest.hash64(Array("t2".utf8)[...]))
        let progress = try scanner.digest(datagram: Self.text(Self.samples[8])[...]) { $0 == 183 }
        #expect(progress.reasonPhrase == "Session Progress" && progress.rseq == 0)

        let long = try scanner.digest(datagram: Self.text(Self.samples[12])[...]) { _ in true }
        #expect(long.callID?.count == 125)
        #expect(long.callID != SIPByteKey(Array((String(repeating: "0123456789", count: 12) + "@lonG").utf8)[...]))
        #expect(long.callID == SIPByteKey(Array((String(repeating: "0123456789", count: 12) + "@long").utf8)[...]))
    }

    /// The reason-phrase question is asked once, for taken messages only — also when the quick
    /// pass gives up and the full parse decides.
    @Test func reasonPhraseIsAskedOnceForTakenMessagesOnly() throws {
        var scanner = SIPDigestScanner()
        var asked: [Int] = []
        let bareLF = Self.text("SIP/2.0 404 Not Here\nCall-ID: x\nCSeq: 1 INVITE\n\n")
        let d = try scanner.digest(datagram: bareLF[...]) { asked.append($0); return true }
        #expect(d.reasonPhrase == "Not Here" && asked == [404])
        let truncated = Self.text("SIP/2.0 500 Oops\r\nCall-ID: x\r\nContent-Length: 9\r\n\r\nshort")
        #expect(throws: SIPParseError.self) { try scanner.digest(datagram: truncated[...]) { asked.append($0); return true } }
        let quick = Self.text("SIP/2.0 180 Ringing\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n\r\n")
        let r = try scanner.digest(datagram: quick[...]) { asked.append($0); return false }
        #expect(r.reasonPhrase == nil && r.statusCode == 180)
        #expect(asked == [404, 180])
    }

    @Test func callIDKeysCompareByteForByte() {
        let a = SIPByteKey(Array("abc@x".utf8)[...]), b = SIPByteKey(Array("abc@x".utf8)[...]), c = SIPByteKey(Array("abC@x".utf8)[...])
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(a != c)
        #expect(SIPByteKey(Array("abc@x\0".utf8)[...]) != a)  // same words, other length
        #expect(SIPByteKey() == SIPByteKey([][...]) && SIPByteKey().count == 0)
        #expect(a.string == "abc@x")
    }

    /// Every corpus capture, decoded twice: the digests of a `digests: true` decoder equal the
    /// digests of the messages a plain decoder yields, in the same order; reason phrases come
    /// with the first response of each code only.
    @Test func corpusDigestsEqualMessageDigests() throws {
        guard CorpusTests.corpusPresent() else { return }
        var total = 0
        for path in CorpusTests.expected.map(\.path) {
            let plain = try CaptureSummary(path: Corpus.root + "/" + path)
            let reader = try SIPCaptureReader(path: Corpus.root + "/" + path, digests: true)
            var digests: [CapturedSIPDigest] = []
            var anomalies = 0
            var fileError: CaptureFileError?
            do throws(CaptureFileError) {
                while let e = try reader.next() {
                    switch e {
                    case .digest(let d): digests.append(d)
                    case .anomaly: anomalies += 1
                    case .message, .datagram: Issue.record("\(path): a digest decoder yielded a message or datagram")
                    }
                }
            } catch {
                fileError = error
            }
            #expect(fileError == plain.fileError, "\(path)")
            if fileError != nil { continue }
            #expect(anomalies == plain.anomalies.count, "\(path)")
            #expect(digests.count == plain.messages.count, "\(path)")
            var reasons: Set<Int> = []
            for (d, m) in zip(digests, plain.messages) {
                let first = m.message.statusCode.map { reasons.insert($0).inserted } ?? false
                #expect(d.digest == SIPMessageDigest(m.message, reasonPhrase: first), "\(path) frame \(m.frameNumber)")
                #expect(d.frameNumber == m.frameNumber && d.timestamp == m.timestamp && d.source == m.source && d.destination == m.destination)
                #expect(d.transport == m.transport)
            }
            total += digests.count
        }
        #expect(total > 100)
    }
}
