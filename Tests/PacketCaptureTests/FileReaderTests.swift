import Testing
import PacketCapture
#if canImport(Glibc)
import Glibc
#endif

@Suite struct FileReaderTests {
    let packet = Build.ethernet(Build.ipv4(proto: 17, Build.udp(5070, 5060, Build.sipInvite)))

    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func classicPcapByteOrdersAndPrecisions(bigEndian: Bool, nanosecond: Bool) throws {
        let file = Build.pcap([packet, packet], bigEndian: bigEndian, nanosecond: nanosecond, times: [(10, 123_456), (11, 999_999)])
        let r = try CaptureFileReader(bytes: file)
        #expect(r.format == .pcap(bigEndian: bigEndian, nanosecond: nanosecond))
        let (frames, error) = readAll(r)
        #expect(error == nil)
        #expect(frames.count == 2)
        #expect(frames[0].data == packet)
        #expect(frames[1].number == 2)
        #expect(frames[0].timestamp == CaptureTimestamp(seconds: 10, nanoseconds: nanosecond ? 123_456 : 123_456_000))
        let s = try CaptureSummary(bytes: file)
        #expect(s.messages.count == 2)
        #expect(s.messages[0].source.description == "192.0.2.1:5070")
    }

    @Test func truncatedGlobalHeader() {
        let file = Array(Build.pcap([]).prefix(10))
        let e = openError(file)
        #expect(e?.rule == .truncatedHeader && e?.offset == 0)
        #expect(openError([0xD4])?.rule == .truncatedHeader)
        // A pcapng section header cut short.
        for n in [6, 20] {
            let (frames, e2) = readAll(try! CaptureFileReader(bytes: Array(Build.shb(false).prefix(n))))
            #expect(frames.isEmpty && e2?.rule == .truncatedHeader && e2?.record == 1 && e2?.offset == 0)
        }
    }

    @Test func truncatedRecordYieldsGoodFramesFirst() throws {
        let file = Array(Build.pcap([packet, packet, packet]).dropLast(5))
        let (frames, error) = readAll(try CaptureFileReader(bytes: file))
        #expect(frames.count == 2)
        let e = try #require(error)
        #expect(e.rule == .truncatedRecord)
        #expect(e.record == 3)
        #expect(e.offset == Int64(24 + 2 * (16 + packet.count)))
        // A cut inside a record header.
        let cut = Array(Build.pcap([packet, packet]).prefix(24 + 16 + packet.count + 7))
        let (f2, e2) = readAll(try CaptureFileReader(bytes: cut))
        #expect(f2.count == 1 && e2?.rule == .truncatedRecord && e2?.record == 2)
        // The summary keeps the good messages and reports the error.
        let s = try CaptureSummary(bytes: file)
        #expect(s.messages.count == 2 && s.fileError?.rule == .truncatedRecord)
    }

    @Test func streamingReaderYieldsEventsThenTheError() throws {
        let file = Array(Build.pcap([packet, packet, packet]).dropLast(1))
        let r = try SIPCaptureReader(bytes: file)
        var messages = 0
        var failure: CaptureFileError?
        do throws(CaptureFileError) {
            while let e = try r.next() { if case .message = e { messages += 1 } }
        } catch {
            failure = error
        }
        #expect(messages == 2)
        #expect(failure?.rule == .truncatedRecord && failure?.record == 3)
        #expect(r.counters.frames == 2)
    }

    @Test func eventBatchesMatchTheOneByOneReader() throws {
        func kinds(_ events: [CaptureEvent]) -> [String] {
            events.map { if case .message = $0 { "message" } else { "other" } }
        }
        let file = Build.pcap([packet, packet, packet])
        let single = try SIPCaptureReader(bytes: file)
        var one: [CaptureEvent] = []
        while let e = try single.next() { one.append(e) }
        #expect(try single.next() == nil)
        let batched = try SIPCaptureReader(bytes: file)
        var all: [CaptureEvent] = []
        var batch = one  // stale contents, replaced by each call
        var batches = 0
        while try batched.nextEvents(into: &batch) {
            #expect(!batch.isEmpty)
            all += batch
            batches += 1
        }
        #expect(batch.isEmpty)
        #expect(try batched.nextEvents(into: &batch) == false)
        #expect(kinds(all) == kinds(one) && kinds(one) == ["message", "message", "message"])
        #expect(batches == 3 && batched.counters.frames == single.counters.frames)
        // A truncated file: the batches before the failure, then the error.
        let cut = try SIPCaptureReader(bytes: Array(file.dropLast(1)))
        var count = 0
        #expect(throws: CaptureFileError.self) {
            while try cut.nextEvents(into: &batch) { count += batch.count }
        }
        #expect(count == 2)
    }

    @Test func recordOverSnapLengthOrLimit() throws {
        let file = Build.pcap([packet], snapLength: 64)
        let (frames, error) = readAll(try CaptureFileReader(bytes: file))
        #expect(frames.isEmpty)
        #expect(error?.rule == .recordTooLong && error?.record == 1 && error?.offset == 24 + 8)
        let (_, e2) = readAll(try CaptureFileReader(bytes: Build.pcap([packet]), maxRecordLength: 100))
        #expect(e2?.rule == .recordTooLong)
    }

    @Test func unsupportedLinkTypeAndForeignFormats() {
        #expect(openError(Build.pcap([packet], linkType: 147))?.rule == .unsupportedLinkType)
        let netmon = openError(Array("GMBU".utf8) + Array(repeating: 0, count: 60))
        #expect(netmon?.rule == .netMonFormat)
        #expect(netmon?.description.contains("Network Monitor") == true)
        #expect(openError(Array("hello world".utf8))?.rule == .unknownFormat)
    }

    @Test(arguments: [false, true])
    func pcapngInterfacesResolutionsAndBlocks(bigEndian big: Bool) throws {
        let raw = Build.ipv4(proto: 17, Build.udp(5070, 5060, Build.sipInvite))
        var file = Build.shb(big)
        file += Build.idb(linkType: 1, big)                         // interface 0: Ethernet, microseconds
        file += Build.idb(linkType: 228, tsresol: 9, big)           // interface 1: raw IPv4, nanoseconds
        file += Build.idb(linkType: 101, tsresol: 0x80 | 10, big)   // interface 2: raw IP, 2^-10 s
        file += Build.block(0x0BAD_0001, [1, 2, 3, 4, 5, 6, 7, 8], big)  // unknown: skipped
        file += Build.epb(interface: 0, ts: 1_500_000_000_250_000, packet, big)
        file += Build.epb(interface: 1, ts: 1_500_000_000_000_000_123, raw, big)
        file += Build.epb(interface: 2, ts: 1024 * 7 + 512, raw, big)
        file += Build.spb(packet, big)
        let r = try CaptureFileReader(bytes: file)
        #expect(r.format == .pcapng)
        let (frames, error) = readAll(r)
        #expect(error == nil)
        #expect(frames.map(\.number) == [1, 2, 3, 4])
        #expect(frames.map(\.linkType) == [.ethernet, .ipv4, .raw, .ethernet])
        #expect(frames.map(\.interfaceIndex) == [0, 1, 2, 0])
        #expect(frames[0].timestamp == CaptureTimestamp(seconds: 1_500_000_000, nanoseconds: 250_000_000))
        #expect(frames[1].timestamp == CaptureTimestamp(seconds: 1_500_000_000, nanoseconds: 123))
        #expect(frames[2].timestamp == CaptureTimestamp(seconds: 7, nanoseconds: 500_000_000))
        #expect(frames[3].data == packet)
        let s = try CaptureSummary(bytes: file)
        #expect(s.messages.count == 4)
    }

    @Test func pcapngSecondSectionChangesByteOrder() throws {
        let file = Build.shb(false) + Build.idb(linkType: 1, false) + Build.epb(interface: 0, ts: 1, packet, false)
            + Build.shb(true) + Build.idb(linkType: 1, true) + Build.epb(interface: 0, ts: 2, packet, true)
        let (frames, error) = readAll(try CaptureFileReader(bytes: file))
        #expect(error == nil && frames.count == 2)
    }

    @Test func pcapngBadBlockLengths() throws {
        let good = Build.shb(false) + Build.idb(linkType: 1, false)
        let epb = Build.epb(interface: 0, ts: 1, packet, false)
        // Length not a multiple of 4.
        var bad = epb
        bad[4] &+= 2
        let (f1, e1) = readAll(try CaptureFileReader(bytes: good + epb + bad))
        #expect(f1.count == 1)
        #expect(e1?.rule == .badBlockLength && e1?.record == 4 && e1?.offset == Int64(good.count + epb.count + 4))
        // Trailing length differs.
        var bad2 = epb
        bad2[bad2.count - 4] &+= 4
        let (_, e2) = readAll(try CaptureFileReader(bytes: good + bad2))
        #expect(e2?.rule == .badBlockLength)
        // Block running past the end of the file.
        let (_, e3) = readAll(try CaptureFileReader(bytes: good + Array(epb.dropLast(8))))
        #expect(e3?.rule == .truncatedRecord)
        // Packet for an interface never described.
        let (_, e4) = readAll(try CaptureFileReader(bytes: good + Build.epb(interface: 3, ts: 1, packet, false)))
        #expect(e4?.rule == .unknownInterface)
        // Bad byte-order magic.
        var shb = Build.shb(false)
        shb[8] = 0
        let (_, e5) = readAll(try CaptureFileReader(bytes: shb))
        #expect(e5?.rule == .badSectionHeader)
    }

    @Test func unknownLinkTypeInPcapngIsAnAnomaly() throws {
        let file = Build.shb(false) + Build.idb(linkType: 147, false) + Build.epb(interface: 0, ts: 1, packet, false)
        let s = try CaptureSummary(bytes: file)
        #expect(s.messages.isEmpty && s.fileError == nil)
        guard case .unsupportedLinkType(147) = try #require(s.anomalies.first).kind else { Issue.record("no anomaly"); return }
    }

    @Test func streamsAFileInChunks() throws {
        let frames = (0..<3000).map { i in Build.ethernet(Build.ipv4(proto: 17, Build.udp(4000, 4001, Array(repeating: UInt8(i & 0x7F), count: 100)))) }
        let path = "/tmp/packetcapture-test-\(getpid()).pcap"
        let bytes = Build.pcap(frames)
        let f = try #require(fopen(path, "wb"))
        _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
        defer { unlink(path) }
        let (read, error) = readAll(try CaptureFileReader(path: path))
        #expect(error == nil)
        #expect(read.count == 3000)
        #expect(read[2999].data == frames[2999])
        let s = try CaptureSummary(path: path)
        #expect(s.counters.nonSIPPayloads == 3000)
    }
}

/// The error opening `bytes` fails with, or nil when it opens.
func openError(_ bytes: [UInt8]) -> CaptureFileError? {
    do throws(CaptureFileError) {
        _ = try CaptureFileReader(bytes: bytes)
        return nil
    } catch {
        return error
    }
}
