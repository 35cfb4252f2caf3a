// MediaCodecsBench: the Swift side of scripts/bench-media. The same work as Benchmarks/cmedia/cmedia.c
// (see there), through Switchboard's OpusEncoder/OpusDecoder and SRTPSession, plus G.711
// throughput. Prints one line per measurement in the harness's key=value format.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Media
import MediaCodecs
import SRTP

let frame = 960
let slot = 1600

func nowNanoseconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) * 1e9 + Double(ts.tv_nsec)
}


func fail(_ message: String) -> Never {
    let text = "MediaCodecsBench: \(message)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

var frames = 3000, rounds = 5
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst().flatMap({ Int($0) }), value > 0 else { fail("bad value for \(flag)") }
    switch flag {
    case "--frames": frames = value
    case "--rounds": rounds = value
    default: fail("unknown option \(flag)")
    }
}

// The same samples as cmedia.c's sample_at.
var signal = SyntheticSignal()
let pcm = signal.nextFrame(count: frame * frames) ?? []

do {
    let encoder = try OpusEncoder(.init(bitrate: 32000, inbandFEC: true, expectedPacketLossPercent: 10))
    let decoder = try OpusDecoder()
    let key = SRTPMasterKey(key: (0..<16).map { UInt8($0 * 7 + 1) }, salt: (16..<30).map { UInt8($0 * 7 + 1) })
    let sender = try SRTPSession(direction: .outbound, profile: .aesCM128HMACSHA1_80, keys: [key])
    let receiver = try SRTPSession(direction: .inbound, profile: .aesCM128HMACSHA1_80, keys: [key])

    var slab = [UInt8](repeating: 0, count: slot * frames)
    var lengths = [Int](repeating: 0, count: frames)
    var out = [Int16](repeating: 0, count: frame * 6)
    var seq: UInt16 = 0
    var ts: UInt32 = 0
    let ssrc: UInt32 = 0x1122_3344
    var bestSend = Double.infinity, bestReceive = Double.infinity
    var checksum: UInt64 = 0, bytes: UInt64 = 0

    try pcm.withUnsafeBufferPointer { pcm in
        try slab.withUnsafeMutableBytes { slab in
            try out.withUnsafeMutableBufferPointer { out in
                for round in 0..<rounds {
                    var roundSum: UInt64 = 0, roundBytes: UInt64 = 0
                    let t0 = nowNanoseconds()
                    for f in 0..<frames {
                        let packet = UnsafeMutableRawBufferPointer(rebasing: slab[(f * slot)..<((f + 1) * slot)])
                        packet[0] = 0x80
                        packet[1] = 111
                        packet[2] = UInt8(seq >> 8)
                        packet[3] = UInt8(truncatingIfNeeded: seq)
                        packet[4] = UInt8(ts >> 24)
                        packet[5] = UInt8(truncatingIfNeeded: ts >> 16)
                        packet[6] = UInt8(truncatingIfNeeded: ts >> 8)
                        packet[7] = UInt8(truncatingIfNeeded: ts)
                        packet[8] = UInt8(ssrc >> 24)
                        packet[9] = UInt8(truncatingIfNeeded: ssrc >> 16)
                        packet[10] = UInt8(truncatingIfNeeded: ssrc >> 8)
                        packet[11] = UInt8(truncatingIfNeeded: ssrc)
                        let input = UnsafeBufferPointer(rebasing: pcm[(f * frame)..<((f + 1) * frame)])
                        let payload = UnsafeMutableRawBufferPointer(rebasing: packet[12..<(slot - SRTPSession.maximumTrailerLength)])
                        let n = try encoder.encode(input, into: payload)
                        roundBytes += UInt64(n)
                        for i in 0..<n { roundSum += UInt64(packet[12 + i]) }
                        lengths[f] = try sender.protectRTP(buffer: packet, length: 12 + n)
                        seq &+= 1
                        ts &+= UInt32(frame)
                    }
                    let t1 = nowNanoseconds()
                    for f in 0..<frames {
                        let packet = UnsafeMutableRawBufferPointer(rebasing: slab[(f * slot)..<((f + 1) * slot)])
                        let length = try receiver.unprotectRTP(buffer: packet, length: lengths[f])
                        let n = try decoder.decode(UnsafeRawBufferPointer(rebasing: packet[12..<length]), into: out)
                        if n != frame { fail("decoded \(n) samples") }
                    }
                    let t2 = nowNanoseconds()
                    bestSend = min(bestSend, (t1 - t0) / Double(frames))
                    bestReceive = min(bestReceive, (t2 - t1) / Double(frames))
                    if round == 0 {
                        checksum = roundSum
                        bytes = roundBytes
                    }
                }
            }
        }
    }
    // SRTP alone (see cmedia.c): 172-byte packets, protect then unprotect, separate sessions.
    let sender2 = try SRTPSession(direction: .outbound, profile: .aesCM128HMACSHA1_80, keys: [key])
    let receiver2 = try SRTPSession(direction: .inbound, profile: .aesCM128HMACSHA1_80, keys: [key])
    var bestProtect = Double.infinity, bestUnprotect = Double.infinity
    var seq2: UInt16 = 0
    try slab.withUnsafeMutableBytes { slab in
        for _ in 0..<rounds {
            let t0 = nowNanoseconds()
            for f in 0..<frames {
                let packet = UnsafeMutableRawBufferPointer(rebasing: slab[(f * slot)..<((f + 1) * slot)])
                packet.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0xA5, count: 172)
                packet[0] = 0x80
                packet[1] = 0
                packet[2] = UInt8(seq2 >> 8)
                packet[3] = UInt8(truncatingIfNeeded: seq2)
                packet[8] = 0x55
                packet[9] = 0x66
                packet[10] = 0x77
                packet[11] = 0x88
                lengths[f] = try sender2.protectRTP(buffer: packet, length: 172)
                seq2 &+= 1
            }
            let t1 = nowNanoseconds()
            for f in 0..<frames {
                let packet = UnsafeMutableRawBufferPointer(rebasing: slab[(f * slot)..<((f + 1) * slot)])
                _ = try receiver2.unprotectRTP(buffer: packet, length: lengths[f])
            }
            let t2 = nowNanoseconds()
            bestProtect = min(bestProtect, (t1 - t0) / Double(frames))
            bestUnprotect = min(bestUnprotect, (t2 - t1) / Double(frames))
        }
    }
    print("switchboard send_ns=\(Int(bestSend.rounded())) recv_ns=\(Int(bestReceive.rounded())) protect_ns=\(Int(bestProtect.rounded())) unprotect_ns=\(Int(bestUnprotect.rounded())) bytes=\(bytes) checksum=\(checksum)")

    // G.711: 20 ms frames (160 samples) through the AudioEncoder/AudioDecoder protocols; the
    // clock is read once per pass over all frames.
    for law in [G711.Law.muLaw, .aLaw] {
        var g711Encoder = try G711Encoder(law: law)
        var g711Decoder = try G711Decoder(law: law)
        let samples = 160
        let count = pcm.count / samples
        var codes = [UInt8](repeating: 0, count: pcm.count)
        var decoded = [Int16](repeating: 0, count: pcm.count)
        var bestEncode = Double.infinity, bestDecode = Double.infinity
        var sum: UInt64 = 0
        for _ in 0..<rounds {
            try pcm.withUnsafeBufferPointer { pcm in
                try codes.withUnsafeMutableBytes { codes in
                    try decoded.withUnsafeMutableBufferPointer { decoded in
                        let t0 = nowNanoseconds()
                        for f in 0..<count {
                            let range = (f * samples)..<((f + 1) * samples)
                            _ = try g711Encoder.encode(UnsafeBufferPointer(rebasing: pcm[range]), into: UnsafeMutableRawBufferPointer(rebasing: codes[range]))
                        }
                        let t1 = nowNanoseconds()
                        for f in 0..<count {
                            let range = (f * samples)..<((f + 1) * samples)
                            _ = try g711Decoder.decode(UnsafeRawBufferPointer(rebasing: codes[range]), into: UnsafeMutableBufferPointer(rebasing: decoded[range]))
                        }
                        let t2 = nowNanoseconds()
                        bestEncode = min(bestEncode, (t1 - t0) / Double(count))
                        bestDecode = min(bestDecode, (t2 - t1) / Double(count))
                        sum = 0
                        for i in stride(from: 0, to: decoded.count, by: 97) { sum &+= UInt64(codes[i]) &+ UInt64(UInt16(bitPattern: decoded[i])) }
                    }
                }
            }
        }
        let name = law == .muLaw ? "pcmu" : "pcma"
        let encodeRate = Double(samples) / bestEncode * 1e3  // million samples per second
        let decodeRate = Double(samples) / bestDecode * 1e3
        print("g711-\(name) encode_ns_per_frame=\(Int(bestEncode.rounded())) decode_ns_per_frame=\(Int(bestDecode.rounded())) encode_msamples_per_s=\(Int(encodeRate)) decode_msamples_per_s=\(Int(decodeRate)) checksum=\(sum)")
    }
} catch {
    fail("\(error)")
}
