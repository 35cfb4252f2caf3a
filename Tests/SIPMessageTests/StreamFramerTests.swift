import Testing
@testable import SIPMessage

@Suite("Stream framing")
struct StreamFramerTests {
    static let two = crlf("OPTIONS sip:a@b SIP/2.0\nCall-ID: 1\nContent-Length: 3\n\nabcSIP/2.0 200 OK\nCall-ID: 2\nContent-Length: 0\n\n")

    func drain(_ f: inout SIPStreamFramer) throws -> [SIPStreamEvent] {
        var out: [SIPStreamEvent] = []
        while let e = try f.next() { out.append(e) }
        return out
    }

    func messages(_ events: [SIPStreamEvent]) -> [SIPMessage] {
        events.compactMap { if case .message(let m) = $0 { return m } else { return nil } }
    }

    @Test func cutsMessagesByContentLength() throws {
        var f = SIPStreamFramer()
        f.append(Self.two)
        let ms = messages(try drain(&f))
        #expect(ms.count == 2)
        #expect(Array(ms[0].body) == Array("abc".utf8))
        #expect(ms[1].statusCode == 200)
        #expect(f.bufferedByteCount == 0)
    }

    @Test func everySplitPointGivesTheSameMessages() throws {
        for cut in 0...Self.two.count {
            var f = SIPStreamFramer()
            f.append(Self.two[..<cut])
            var ms = messages(try drain(&f))
            f.append(Self.two[cut...])
            ms += messages(try drain(&f))
            #expect(ms.map(\.callID) == ["1", "2"], "split at \(cut)")
        }
    }

    @Test func byteByByteFeeding() throws {
        var f = SIPStreamFramer()
        var ms: [SIPMessage] = []
        for b in Self.two {
            f.append([b])
            ms += messages(try drain(&f))
        }
        #expect(ms.count == 2)
        #expect(ms[0].serialized() == Array(Self.two[0..<61]))
    }

    @Test func keepAlives() throws {
        var f = SIPStreamFramer()
        f.append(Array("\r\n\r\n".utf8))
        #expect(try drain(&f).count == 1)
        f.append(Array("\r\nOPTIONS sip:a@b SIP/2.0\r\nContent-Length: 0\r\n\r\n".utf8))
        let ev = try drain(&f)
        guard ev.count == 2, case .keepAlivePong = ev[0], case .message = ev[1] else {
            Issue.record("expected pong then message, got \(ev)"); return
        }
        var g = SIPStreamFramer()
        g.append(Array("\r\n\r\n".utf8))
        guard case .keepAlivePing = try g.next() else { Issue.record("expected ping"); return }
    }

    @Test func strictModeFailsOnGarbageAndMissingLength() throws {
        var f = SIPStreamFramer()
        f.append([0x16, 0x03, 0x01, 0x00])  // a TLS ClientHello on a plain port
        let e = expectParseError(.garbage) { _ = try f.next() }
        #expect(e?.offset == 0)
        expectParseError(.garbage) { _ = try f.next() }  // the stream stays failed

        var g = SIPStreamFramer()
        g.append(crlf("OPTIONS sip:a@b SIP/2.0\nCall-ID: 1\n\n"))
        expectParseError(.missingContentLength) { _ = try g.next() }

        var h = SIPStreamFramer()
        h.append(crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 0\n\n"))
        h.append(crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: x\n\n"))
        guard case .message = try h.next() else { Issue.record("expected a message"); return }
        let e2 = expectParseError(.contentLength) { _ = try h.next() }
        #expect(e2.map { $0.offset > 45 } == true)
    }

    @Test func oversizedMessagesFailWithoutUnboundedBuffering() throws {
        var f = SIPStreamFramer(limits: SIPParserLimits(maxMessageSize: 1000, maxHeaderCount: 50, maxLineLength: 500, maxBodySize: 500))
        f.append(Array("OPTIONS sip:a@b SIP/2.0\r\n".utf8))
        var failed: SIPParseError?
        for _ in 0..<200 {
            f.append(Array("X-Filler: 0123456789\r\n".utf8))
            do { _ = try f.next() } catch { failed = error; break }
        }
        #expect(failed?.rule == .messageTooLarge || failed?.rule == .tooManyHeaders)
        var g = SIPStreamFramer(limits: SIPParserLimits(maxMessageSize: 1000, maxHeaderCount: 50, maxLineLength: 100, maxBodySize: 500))
        g.append(Array("OPTIONS sip:a@b SIP/2.0\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: 200))
        expectParseError(.lineTooLong) { _ = try g.next() }
        var h = SIPStreamFramer(limits: SIPParserLimits(maxMessageSize: 1000, maxHeaderCount: 50, maxLineLength: 100, maxBodySize: 500))
        h.append(crlf("OPTIONS sip:a@b SIP/2.0\nContent-Length: 600\n\n"))
        expectParseError(.bodyTooLarge) { _ = try h.next() }
    }

    @Test func tricklingBytesCostsFewParses() throws {
        // A 20 KB header section delivered one byte at a time: the framer parses only when the
        // blank line arrives (and once more when the body is complete), not on every byte.
        var f = SIPStreamFramer()
        let big = crlf("OPTIONS sip:a@b SIP/2.0\n" + String(repeating: "X-Pad: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", count: 250) + "Content-Length: 5\n\nhello")
        var got: [SIPMessage] = []
        for b in big {
            f.append([b])
            while let e = try f.next() { if case .message(let m) = e { got.append(m) } }
        }
        #expect(got.count == 1)
        #expect(Array(got[0].body) == Array("hello".utf8))
        #expect(f.parseAttempts <= 3, "\(f.parseAttempts) parses")
        // An overlong line still fails early, without waiting for the size limit.
        var g = SIPStreamFramer(limits: SIPParserLimits(maxMessageSize: 60_000, maxLineLength: 100))
        g.append(Array("OPTIONS sip:a@b SIP/2.0\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: 200))
        expectParseError(.lineTooLong) { _ = try g.next() }
    }

    @Test func resynchronizationKeepsAMessageThatFollowsABrokenOne() throws {
        var f = SIPStreamFramer(mode: .resynchronizing)
        f.append(crlf("INVITE sip:a@b SIP/2.0\nBad Header\nOPTIONS sip:b@c SIP/2.0\nCall-ID: keep\nContent-Length: 0\n\n"))
        let ev = try drain(&f)
        #expect(messages(ev).map(\.callID) == ["keep"])
    }

    @Test func resynchronizingModeSkipsJunk() throws {
        var f = SIPStreamFramer(mode: .resynchronizing)
        f.append(crlf("blah\nmore junk\nSIP/2.0 200 OK\nContent-Length: 0\n\nINVITE sip:x SIP/2.0\n\nSIP/2.0 180 Ringing\nContent-Length: 0\n\n"))
        let ev = try drain(&f)
        var discarded: [String] = []
        var codes: [Int] = []
        for e in ev {
            switch e {
            case .discarded(let b, _): discarded.append(String(decoding: b, as: UTF8.self))
            case .message(let m): codes.append(m.statusCode ?? 0)
            default: break
            }
        }
        #expect(discarded == ["blah\r\nmore junk\r\n", "INVITE sip:x SIP/2.0\r\n\r\n"])
        #expect(codes == [200, 180])
    }
}
