import NetworkIO
import Testing

@testable import PacketCapture

/// HEP version 3 packets: the layout, a round trip, and bad input rejected by offset and rule.
struct HEPTests {
    static let a = try! SocketAddress(ip: "192.0.2.10", port: 5060)
    static let b = try! SocketAddress(ip: "198.51.100.7", port: 5080)

    static func sample(payload: [UInt8] = Array("OPTIONS sip:b SIP/2.0\r\n\r\n".utf8)) -> HEPPacket {
        HEPPacket(source: a, destination: b, ipProtocol: .udp, seconds: 1_764_000_000, microseconds: 123_456, payloadType: .sip, agentID: 2001,
                  authKey: "secret", correlationID: "call-1@x", payload: payload)
    }

    @Test("the wire layout: HEP3, the total length, then vendor/type/length chunks in network order")
    func layout() throws {
        let p = Self.sample()
        let bytes = try p.encoded()
        #expect(bytes.count == p.encodedSize)
        #expect(Array(bytes[0..<4]) == Array("HEP3".utf8))
        #expect(Int(bytes[4]) << 8 | Int(bytes[5]) == bytes.count)
        // First chunk: vendor 0, type 1 (IP family), length 7, value 2 (IPv4).
        #expect(Array(bytes[6..<13]) == [0, 0, 0, 1, 0, 7, 2])
        // Second: type 2 (IP protocol), UDP (17).
        #expect(Array(bytes[13..<20]) == [0, 0, 0, 2, 0, 7, 17])
        // Third: type 3, the IPv4 source.
        #expect(Array(bytes[20..<30]) == [0, 0, 0, 3, 0, 10, 192, 0, 2, 10])
        // The payload is the last chunk (type 15), its length covering its header.
        let tail = bytes.count - p.payload.count - 6
        #expect(Array(bytes[tail..<(tail + 6)]) == [0, 0, 0, 15, UInt8((p.payload.count + 6) >> 8), UInt8((p.payload.count + 6) & 0xFF)])
        #expect(Array(bytes[(tail + 6)...]) == p.payload)
    }

    @Test("encoded packets decode to themselves, IPv4 and IPv6, with and without the optional chunks")
    func roundTrip() throws {
        var p = Self.sample()
        #expect(try HEPPacket(decoding: p.encoded()) == p)
        p.authKey = nil
        p.correlationID = nil
        p.ipProtocol = .tcp
        p.payloadType = .rtcp
        #expect(try HEPPacket(decoding: p.encoded()) == p)
        p.source = try SocketAddress("[2001:db8::1]:5060")
        p.destination = try SocketAddress("[2001:db8::2]:6000")
        let bytes = try p.encoded()
        #expect(bytes[12] == 10, "IPv6 family")
        #expect(try HEPPacket(decoding: bytes) == p)
    }

    @Test("a time since 1970 splits into seconds and microseconds")
    func time() {
        let p = HEPPacket(source: Self.a, destination: Self.b, time: .seconds(1_700_000_000) + .microseconds(654_321), payloadType: .sip, payload: [1])
        #expect(p.seconds == 1_700_000_000 && p.microseconds == 654_321)
    }

    @Test("refused: a packet over 65,535 octets, mixed address families")
    func encodingErrors() throws {
        let big = Self.sample(payload: [UInt8](repeating: 0x41, count: 65_500))
        #expect(throws: HEPError.tooLarge(big.encodedSize)) { try big.encoded() }
        var mixed = Self.sample()
        mixed.destination = try SocketAddress("[2001:db8::2]:6000")
        #expect(throws: HEPError.mixedFamilies) { try mixed.encoded() }
    }

    @Test("bad input names the offset and what is wrong")
    func decodingErrors() throws {
        let good = try Self.sample().encoded()
        #expect(throws: HEPError.truncated(offset: 3, needed: 6)) { try HEPPacket(decoding: Array(good[0..<3])) }
        var magic = good
        magic[3] = 0x32
        #expect(throws: HEPError.notHEP3) { try HEPPacket(decoding: magic) }
        #expect(throws: HEPError.lengthMismatch(declared: good.count, actual: good.count - 1)) { try HEPPacket(decoding: Array(good.dropLast())) }
        var short = good
        short[11] = 5   // the first chunk's length under its own header
        #expect(throws: HEPError.badChunkLength(offset: 6, length: 5)) { try HEPPacket(decoding: short) }
        var long = good
        long[11] = 8    // a one-octet family chunk said to hold two
        #expect(throws: HEPError.badChunkLength(offset: 6, length: 8)) { try HEPPacket(decoding: long) }
        var over = good
        over[10] = 0xFF // a chunk running past the end
        #expect(throws: HEPError.truncated(offset: 6, needed: 0xFF07)) { try HEPPacket(decoding: over) }
        // Without a payload chunk: the header and the chunks before it, re-framed.
        let p = Self.sample()
        var cut = Array(good[0..<(good.count - p.payload.count - 6)])
        cut[4] = UInt8(cut.count >> 8)
        cut[5] = UInt8(cut.count & 0xFF)
        #expect(throws: HEPError.missingChunk(15)) { try HEPPacket(decoding: cut) }
    }

    @Test("unknown chunks (another vendor's, keep-alive) are skipped")
    func unknownChunks() throws {
        var bytes = try Self.sample().encoded()
        bytes += [0x00, 0x21, 0x00, 0x01, 0x00, 0x08, 0xAB, 0xCD]   // vendor 0x21
        bytes += [0x00, 0x00, 0x00, 0x0D, 0x00, 0x08, 0x00, 0x3C]   // keep-alive timer
        bytes[4] = UInt8(bytes.count >> 8)
        bytes[5] = UInt8(bytes.count & 0xFF)
        #expect(try HEPPacket(decoding: bytes) == Self.sample())
    }

    @Test("5,000 mutated packets: each decodes or throws, never traps")
    func mutations() throws {
        let good = try Self.sample().encoded()
        var rng = SplitMix(seed: 0x4845_5033)
        var decoded = 0
        for _ in 0..<5_000 {
            var bytes = good
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let i = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[i] = UInt8(truncatingIfNeeded: rng.next())
                case 1: bytes.removeSubrange(i...)
                default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: i)
                }
                if bytes.isEmpty { break }
            }
            if (try? HEPPacket(decoding: bytes)) != nil { decoded += 1 }
        }
        // Mutations in the payload or the values keep the framing: some still decode.
        #expect(decoded > 0 && decoded < 5_000)
    }
}

/// A small seeded generator (SplitMix64) for repeatable mutations.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
