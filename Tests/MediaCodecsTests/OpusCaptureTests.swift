import PacketCapture
import RTP
import SwitchboardTestSupport
import Testing

@testable import MediaCodecs

/// The Opus RTP streams of the Asterisk test suite's captures (`../shared/corpora`, read in place).
@Suite(
    .enabled(
        if: TestPaths.corporaHas("pcaps/asterisk-testsuite") || TestPaths.isCI,
        "../shared/corpora is missing: Opus capture tests skipped"),
    .requiresCorpus("pcaps/asterisk-testsuite"))
struct OpusCaptureTests {
    /// The RTP packets of `payloadType` in a capture (Ethernet or Linux cooked, IPv4, UDP).
    static func rtpPackets(_ file: String, payloadType: UInt8) throws -> [RTPPacket] {
        let reader = try CaptureFileReader(path: TestPaths.corpus("pcaps/asterisk-testsuite/" + file))
        var packets: [RTPPacket] = []
        while let frame = try reader.nextFrame() {
            let d = frame.data
            let link: Int
            switch frame.linkType {
            case .ethernet: link = 14
            case .linuxSLL: link = 16
            default: continue
            }
            guard d.count > link + 28, d[link] >> 4 == 4, d[link + 9] == 17 else { continue }
            let udp = link + Int(d[link] & 0x0F) * 4
            guard udp + 8 <= d.count, let packet = try? RTPPacket(parsing: Array(d[(udp + 8)...])),
                packet.payloadType == payloadType
            else { continue }
            packets.append(packet)
        }
        return packets
    }

    @Test(arguments: [("opus-2013785496.pcap", UInt8(96)), ("16_bit_48khz_60_fec_rtp.pcapng", UInt8(107))])
    func everyPayloadDecodes(file: String, payloadType: UInt8) throws {
        let packets = try Self.rtpPackets(file, payloadType: payloadType)
        try #require(packets.count > 500, "\(file): \(packets.count) Opus packets")
        let decoder = try OpusDecoder(sampleRate: 48000, channels: 2)
        var samples = 0, loud = 0
        for packet in packets {
            let payload = Array(packet.payload)
            let expected = try #require(Opus.samplesPerChannel(inPacket: payload), "TOC of packet \(packet.sequenceNumber)")
            let pcm = try decoder.decode(payload)
            #expect(pcm.count == expected * 2)
            samples += pcm.count / 2
            if pcm.contains(where: { abs(Int($0)) > 1000 }) { loud += 1 }
        }
        #expect(samples >= packets.count * 480)
        #expect(loud > packets.count / 20, "\(file): the stream carries audio, not only silence")
    }

    static func squaredError(_ a: [Int16], _ b: [Int16]) -> Double {
        var sum = 0.0
        for (x, y) in zip(a, b) {
            let d = Double(x) - Double(y)
            sum += d * d
        }
        return sum
    }

    /// The FEC capture: a lost packet is recovered from the next packet's FEC data, closer to
    /// the real decoding than concealment is.
    @Test func fecInTheCaptureRecoversLostPackets() throws {
        let packets = try Self.rtpPackets("16_bit_48khz_60_fec_rtp.pcapng", payloadType: 107)
        try #require(packets.count > 500)
        let reference = try OpusDecoder(), withFEC = try OpusDecoder(), withPLC = try OpusDecoder()
        var fecBetter = 0, trials = 0
        for (i, packet) in packets.enumerated() where i + 1 < packets.count {
            let payload = Array(packet.payload)
            let real = try reference.decode(payload)
            if i % 10 == 5 {
                let duration = real.count
                let recovered = try withFEC.decodeFEC(from: Array(packets[i + 1].payload), samplesPerChannel: duration)
                let concealed = try withPLC.concealLoss(samplesPerChannel: duration)
                let fecError = Self.squaredError(real, recovered), plcError = Self.squaredError(real, concealed)
                trials += 1
                if fecError < plcError { fecBetter += 1 }
            } else {
                _ = try withFEC.decode(payload)
                _ = try withPLC.decode(payload)
            }
        }
        #expect(trials > 50)
        #expect(fecBetter * 10 > trials * 7, "FEC beat PLC in \(fecBetter) of \(trials) losses")
    }
}
