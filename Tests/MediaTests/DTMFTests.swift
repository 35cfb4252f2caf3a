import Testing
import RTP
@testable import Media

@Suite struct DTMFTests {
    // MARK: payload

    @Test func payloadEncodesAndDecodes() throws {
        let e = TelephoneEvent(event: 5, end: true, volume: 10, duration: 800)
        #expect(e.serialized() == [0x05, 0x8A, 0x03, 0x20])
        #expect(try TelephoneEvent(parsing: [0x05, 0x8A, 0x03, 0x20]) == e)
        // The R bit is ignored; extra bytes are not read.
        let r = try TelephoneEvent(parsing: [0x0B, 0x4A, 0xFF, 0xFF, 0x99])
        #expect(r == TelephoneEvent(event: 11, end: false, volume: 10, duration: 65535))
        #expect(r.character == "#")
        #expect(TelephoneEvent(event: 1, volume: 0xFF, duration: 1).volume == 63)
        #expect(throws: DTMFError(offset: 3, rule: .payloadTooShort, detail: "3 bytes, 4 needed")) { try TelephoneEvent(parsing: [1, 2, 3]) }
        #expect(throws: DTMFError.self) { try TelephoneEvent(parsing: [UInt8]()) }
    }

    @Test func digitCodes() {
        let chars = Array("0123456789*#ABCD!")
        for (code, ch) in chars.enumerated() {
            #expect(DTMF.eventCode(for: ch) == UInt8(code))
            #expect(DTMF.character(for: UInt8(code)) == ch)
        }
        #expect(DTMF.eventCode(for: "b") == 13)
        #expect(DTMF.eventCode(for: "E") == nil && DTMF.eventCode(for: "w") == nil)
        #expect(DTMF.character(for: 17) == nil)
    }

    // MARK: sender

    @Test func oneDigitSchedule() throws {
        let packets = try DTMFSender().schedule("1")
        #expect(packets.count == 7)
        #expect(packets.map(\.event.duration) == [160, 320, 480, 640, 800, 800, 800])
        #expect(packets.map(\.event.end) == [false, false, false, false, true, true, true])
        #expect(packets.map(\.marker) == [true, false, false, false, false, false, false])
        #expect(packets.allSatisfy { $0.timestampOffset == 0 && $0.event.event == 1 && $0.event.volume == 10 })
        #expect(packets.map(\.sendOffset) == (0..<7).map { .milliseconds(20 * $0) })
    }

    @Test func digitsGapsAndPauses() throws {
        let packets = try DTMFSender().schedule("12w#,*")
        let starts = packets.filter(\.marker)
        #expect(starts.map(\.event.event) == [1, 2, 11, 10])
        // 1 at 0; 2 at 100 + 70 ms; w = 500 ms; # after 2 + 170 + 500; , = 500 ms.
        #expect(starts.map(\.sendOffset) == [.zero, .milliseconds(170), .milliseconds(840), .milliseconds(1510)])
        #expect(starts.map(\.timestampOffset) == [0, 1360, 6720, 12080])
        // One timestamp per event.
        for s in starts {
            let same = packets.filter { $0.timestampOffset == s.timestampOffset }
            #expect(same.count == 7 && same.allSatisfy { $0.event.event == s.event.event })
        }
        #expect(zip(packets, packets.dropFirst()).allSatisfy { $0.sendOffset <= $1.sendOffset })
        #expect(try DTMFSender().schedule("").isEmpty)
        #expect(try DTMFSender().schedule("1 2").filter(\.marker).count == 2)
    }

    @Test func durationNotAMultipleOfTheIntervalAndWideband() throws {
        let c = DTMFSender.Configuration(clockRate: 48000, digitDuration: .milliseconds(90), volume: 7)
        let packets = try DTMFSender(configuration: c).schedule("D")
        #expect(packets.map(\.event.duration) == [960, 1920, 2880, 3840, 4320, 4320, 4320])
        #expect(packets.allSatisfy { $0.event.event == 15 && $0.event.volume == 7 })
    }

    @Test func longEventIsSplitIntoSegments() throws {
        // Two seconds at 48 kHz is 96000 units: a segment of 65535 and one of 30465.
        let c = DTMFSender.Configuration(clockRate: 48000, digitDuration: .seconds(2))
        let packets = try DTMFSender(configuration: c).schedule("5")
        let first = packets.filter { $0.timestampOffset == 0 }
        let second = packets.filter { $0.timestampOffset == 65535 }
        #expect(first.count + second.count == packets.count)
        #expect(first.filter { $0.event.duration == 65535 }.count == 3)
        #expect(first.allSatisfy { !$0.event.end })
        #expect(second.suffix(3).allSatisfy { $0.event.end && $0.event.duration == 30465 })
        #expect(second.dropLast(3).allSatisfy { !$0.event.end })
        #expect(packets.filter(\.marker).count == 1)
    }

    @Test func invalidInputIsRefused() {
        #expect(throws: DTMFError(offset: 2, rule: .invalidDigit, detail: "'x' is not 0-9 * # A-D ! w ,")) { try DTMFSender().schedule("12x") }
        #expect { try DTMFSender(configuration: .init(digitDuration: .milliseconds(30))) } throws: { ($0 as? DTMFError)?.rule == .badConfiguration }
        #expect { try DTMFSender(configuration: .init(packetInterval: .zero)) } throws: { ($0 as? DTMFError)?.rule == .badConfiguration }
        #expect { try DTMFSender(configuration: .init(clockRate: 0)) } throws: { ($0 as? DTMFError)?.rule == .badConfiguration }
    }

    // MARK: receiver

    /// Sends a schedule through a receiver; `transform` may drop, repeat or reorder.
    static func receive(_ packets: [DTMFPacket], base: UInt32 = 4_000_000_000, receiver: inout DTMFReceiver) throws -> [DTMFReceiver.Output] {
        var out: [DTMFReceiver.Output] = []
        var seq: UInt16 = 65530
        for p in packets {
            let rtp = p.rtpPacket(sequenceNumber: seq, timestampBase: base, ssrc: 1, payloadType: 101)
            seq &+= 1
            out += try receiver.receive(rtp, arrival: p.sendOffset + .milliseconds(30))
            out += receiver.tick(at: p.sendOffset + .milliseconds(30))
        }
        return out
    }

    static func ended(_ outputs: [DTMFReceiver.Output]) -> [ReceivedDTMF] {
        outputs.compactMap { if case .ended(let e) = $0 { e } else { nil } }
    }
    static func began(_ outputs: [DTMFReceiver.Output]) -> [ReceivedDTMF] {
        outputs.compactMap { if case .began(let e) = $0 { e } else { nil } }
    }

    @Test func receiverReportsEachDigitOnce() throws {
        let packets = try DTMFSender().schedule("123#")
        var r = DTMFReceiver()
        let out = try Self.receive(packets, receiver: &r)
        #expect(Self.began(out).compactMap(\.character) == ["1", "2", "3", "#"])
        let ended = Self.ended(out)
        #expect(ended.compactMap(\.character) == ["1", "2", "3", "#"])
        #expect(ended.allSatisfy { $0.duration == 800 && $0.endReceived })
        #expect(ended.map(\.timestamp) == [4_000_000_000, 4_000_001_360, 4_000_002_720, 4_000_004_080])
        // began always precedes ended for the same event
        for e in ended {
            let b = out.firstIndex(of: .began(ReceivedDTMF(event: e.event, timestamp: e.timestamp, duration: 160, volume: 10, endReceived: false)))
            let x = out.firstIndex(of: .ended(e))
            #expect(b != nil && x != nil && b! < x!)
        }
    }

    @Test func duplicatesAndReorderingReportOnce() throws {
        let packets = try DTMFSender().schedule("95")
        var shuffled = packets.flatMap { [$0, $0] }
        shuffled.swapAt(3, 6)
        shuffled.append(packets[6])  // an end packet of the first digit, long after
        var r = DTMFReceiver()
        let out = try Self.receive(shuffled, receiver: &r)
        #expect(Self.began(out).compactMap(\.character) == ["9", "5"])
        #expect(Self.ended(out).compactMap(\.character) == ["9", "5"])
    }

    @Test func lostFirstPacketsStillBeginTheEvent() throws {
        let packets = try DTMFSender().schedule("7")
        var r = DTMFReceiver()
        let out = try Self.receive(Array(packets.dropFirst(2)), receiver: &r)
        #expect(Self.began(out).map(\.duration) == [480])
        #expect(Self.ended(out).map(\.duration) == [800])
        // Only an end packet arrives: began and ended together.
        var r2 = DTMFReceiver()
        let out2 = try Self.receive([packets[5]], receiver: &r2)
        #expect(out2.count == 2 && Self.ended(out2).first?.endReceived == true)
    }

    @Test func lostEndPacketsEndByTheNextEventOrATimeout() throws {
        let packets = try DTMFSender().schedule("48")
        let noEnds = packets.filter { !($0.event.end && $0.event.event == 4) }
        var r = DTMFReceiver()
        let out = try Self.receive(noEnds, receiver: &r)
        let ended = Self.ended(out)
        #expect(ended.compactMap(\.character) == ["4", "8"])
        #expect(ended[0].endReceived == false && ended[0].duration == 640)
        #expect(ended[1].endReceived)

        // The last digit's end lost: only the timeout ends it, once.
        var r2 = DTMFReceiver(endTimeout: .milliseconds(200))
        let only = packets.filter { !$0.event.end }
        _ = try Self.receive(only.filter { $0.event.event == 4 }, receiver: &r2)
        #expect(r2.inProgress?.character == "4")
        #expect(r2.tick(at: .milliseconds(100)).isEmpty)
        let t = r2.tick(at: .milliseconds(500))
        #expect(Self.ended(t).map(\.duration) == [640])
        #expect(r2.tick(at: .seconds(5)).isEmpty)
        #expect(r2.inProgress == nil)
    }

    @Test func longEventAcrossSegmentsIsOneDigit() throws {
        let c = DTMFSender.Configuration(clockRate: 48000, digitDuration: .seconds(3))
        let packets = try DTMFSender(configuration: c).schedule("0")
        var r = DTMFReceiver()
        let out = try Self.receive(packets, receiver: &r)
        #expect(Self.began(out).count == 1)
        #expect(Self.ended(out).map(\.duration) == [144_000])
        // The same with the segment's final packets all lost.
        var r2 = DTMFReceiver()
        let lossy = packets.filter { $0.event.duration != 65535 }
        let out2 = try Self.receive(lossy, receiver: &r2)
        #expect(Self.began(out2).count == 1)
        #expect(Self.ended(out2).map(\.duration) == [144_000])
        // A next digit, then a late end packet of the long one's last segment: nothing new.
        var more = try Self.receive(try DTMFSender().schedule("2").map { var p = $0; p.timestampOffset += 200_000; return p }, receiver: &r)
        more += try r.receive(packets.last!.rtpPacket(sequenceNumber: 1, timestampBase: 4_000_000_000, ssrc: 1, payloadType: 101), arrival: .seconds(9))
        #expect(Self.began(more).compactMap(\.character) == ["2"])
        #expect(Self.ended(more).compactMap(\.character) == ["2"])
    }

    @Test func durationWrapWithinOneTimestampContinues() throws {
        var r = DTMFReceiver()
        var out: [DTMFReceiver.Output] = []
        for (i, d) in [60000, 64000, 1000, 5000].enumerated() {
            out += try r.receive(payload: TelephoneEvent(event: 3, duration: UInt16(d)).serialized(), timestamp: 99, arrival: .milliseconds(i * 20))
        }
        out += try r.receive(payload: TelephoneEvent(event: 3, end: true, duration: 6000).serialized(), timestamp: 99, arrival: .milliseconds(100))
        #expect(Self.began(out).count == 1)
        #expect(Self.ended(out).map(\.duration) == [65536 + 6000])
    }

    @Test func sameDigitTwiceIsTwoEvents() throws {
        var r = DTMFReceiver()
        let out = try Self.receive(try DTMFSender().schedule("11"), receiver: &r)
        #expect(Self.ended(out).compactMap(\.character) == ["1", "1"])
    }

    @Test func badPayloadIsAnError() {
        var r = DTMFReceiver()
        #expect { try r.receive(payload: [1, 2], timestamp: 0, arrival: .zero) } throws: { ($0 as? DTMFError)?.rule == .payloadTooShort }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomPacketsKeepTheBeganEndedPairing(seed: UInt64) throws {
        var rng = TestRandom(seed: seed)
        var r = DTMFReceiver()
        var open: UInt32?
        var endedCount: [UInt32: Int] = [:]
        var time = Duration.zero
        for _ in 0..<20_000 {
            time += .milliseconds(Int.random(in: 0...60, using: &rng))
            let ev = TelephoneEvent(event: UInt8.random(in: 0...3, using: &rng), end: Int.random(in: 0..<6, using: &rng) == 0,
                                    duration: UInt16.random(in: .min ... .max, using: &rng))
            var out = try r.receive(payload: ev.serialized(), timestamp: UInt32.random(in: 0...40, using: &rng) * 1000, arrival: time)
            out += r.tick(at: time)
            for o in out {
                switch o {
                case .began(let e):
                    #expect(open == nil, "began while another event is open")
                    open = e.timestamp
                case .ended(let e):
                    #expect(open == e.timestamp, "ended an event that did not begin")
                    open = nil
                    endedCount[e.timestamp, default: 0] += 1
                }
            }
        }
        #expect(!endedCount.isEmpty)
    }

    // MARK: captures

    static func events(_ file: String, payloadType: UInt8) throws -> [ReceivedDTMF]? {
        let path = TestPaths.corpus("pcaps/" + file)
        guard TestPaths.requireCorpus("pcaps/" + file) else { return nil }
        var r = DTMFReceiver()
        var out: [DTMFReceiver.Output] = []
        let packets = try CapturedRTP.read(path).filter { $0.packet.payloadType == payloadType }
        #expect(!packets.isEmpty)
        for p in packets { out += try r.receive(p.packet, arrival: p.time) }
        out += r.tick(at: packets.last!.time + .seconds(1))
        #expect(began(out).map(\.timestamp) == ended(out).map(\.timestamp))
        // As many events as distinct timestamps.
        var seen: [UInt32] = []
        for p in packets where !seen.contains(p.packet.timestamp) { seen.append(p.packet.timestamp) }
        #expect(ended(out).map(\.timestamp) == seen)
        return ended(out)
    }

    @Test func asteriskOpusCallDigitsMatchTheFileName() throws {
        guard let e = try Self.events("asterisk-testsuite/opus-2013785496.pcap", payloadType: 101) else { return }
        #expect(String(e.compactMap(\.character)) == "2013785496")
        #expect(e.allSatisfy { $0.endReceived && $0.duration == 1600 })
    }

    @Test func sippPcapPlayDigitsMatchTheFileNames() throws {
        if let e = try Self.events("../sipp/pcap-play/dtmf_2833_1.pcap", payloadType: 101) {
            #expect(e.compactMap(\.character) == ["1"] && e[0].endReceived)
        }
        if let e = try Self.events("../sipp/pcap-play/dtmf_2833_pound.pcap", payloadType: 101) {
            #expect(e.compactMap(\.character) == ["#"] && e[0].endReceived)
        }
    }

    @Test func otherCapturesGiveOneEventPerTimestamp() throws {
        if let e = try Self.events("asterisk-testsuite/dtmf_2833_4.pcap", payloadType: 101) {
            #expect(e.count == 1 && e[0].endReceived && e[0].duration == 2240)
        }
        if let e = try Self.events("wireshark-samplecaptures/SIP_DTMF2.cap", payloadType: 96) {
            #expect(e.count == 7 && e.allSatisfy { $0.endReceived && $0.duration == 960 })
        }
    }

    // MARK: SIP INFO

    @Test func dtmfRelayBody() throws {
        let b = try DTMFRelayBody(signal: "5", duration: 160)
        #expect(String(decoding: b.serialized(), as: UTF8.self) == "Signal=5\r\nDuration=160\r\n")
        #expect(try DTMFRelayBody(parsing: b.serialized()) == b)
        let loose = try DTMFRelayBody(parsing: Array(" signal = # \nDURATION=250\nExtra=1\n".utf8))
        #expect(loose.signal == "#" && loose.duration == 250)
        #expect(try DTMFRelayBody(parsing: Array("Signal=11\r\n".utf8)).signal == "#")
        #expect(try DTMFRelayBody(parsing: Array("Signal=c".utf8)) == DTMFRelayBody(signal: "C", duration: nil))
        #expect(try DTMFRelayBody(signal: "d").signal == "D")
    }

    @Test func dtmfRelayErrors() {
        func rule(_ s: String) -> DTMFError.Rule? {
            do { _ = try DTMFRelayBody(parsing: Array(s.utf8)); return nil } catch { return error.rule }
        }
        #expect(rule("Duration=100\r\n") == .missingSignal)
        #expect(rule("Signal=X\r\n") == .badSignal)
        #expect(rule("Signal=17\r\n") == .badSignal)
        #expect(rule("Signal=1\r\nDuration=abc\r\n") == .badDuration)
        #expect(rule("Signal=1\r\nDuration=0\r\n") == .badDuration)
        #expect(rule("Signal=1\r\ngarbage\r\n") == .badLine)
        #expect(rule(String(repeating: "x", count: 2000)) == .bodyTooLarge)
        #expect(throws: DTMFError(offset: 12, rule: .badDuration, detail: "\"-5\"")) { try DTMFRelayBody(parsing: Array("Signal=1\r\n\r\nDuration=-5".utf8)) }
        #expect { try DTMFRelayBody(signal: "x") } throws: { ($0 as? DTMFError)?.rule == .badSignal }
    }

    // MARK: errors

    @Test("DTMF and WAV errors: one form, each format's label, the detail only when given")
    func errorDescriptions() {
        #expect(DTMFError(offset: 2, rule: .invalidDigit, detail: "'x'").description == "DTMF error at offset 2: invalidDigit: 'x'")
        #expect(DTMFError(offset: 0, rule: .badLine).description == "DTMF error at offset 0: badLine")
        #expect(WAVError(offset: 40, rule: .truncatedChunk, detail: "short").description == "WAV error at byte 40: truncatedChunk: short")
        #expect(WAVError(offset: 12, rule: .io) != WAVError(offset: 12, rule: .io, detail: "x"))
    }

}
