import Testing
@testable import RTP

@Suite struct RTPPacketTests {
    @Test func minimalPacket() throws {
        let bytes = hex("80 08 12 34 | 00 00 03 e8 | de ad be ef | 01 02 03")
        let p = try RTPPacket(parsing: bytes)
        #expect(!p.marker)
        #expect(p.payloadType == 8)
        #expect(p.sequenceNumber == 0x1234)
        #expect(p.timestamp == 1000)
        #expect(p.ssrc == 0xDEAD_BEEF)
        #expect(p.csrcs.isEmpty)
        #expect(p.headerExtension == nil)
        #expect(Array(p.payload) == [1, 2, 3])
        #expect(p.payload.startIndex == 12)  // a slice of the input, not a copy
        #expect(p.paddingCount == 0)
        #expect(p.serialized() == bytes)
    }

    @Test func markerCSRCsAndPadding() throws {
        let bytes = hex("A2 E0 00 01 | 00 00 00 10 | 11 22 33 44 | 00 00 00 01 | 00 00 00 02 | AA BB | 00 00 03")
        let p = try RTPPacket(parsing: bytes)
        #expect(p.marker)
        #expect(p.payloadType == 96)
        #expect(p.csrcs == [1, 2])
        #expect(Array(p.payload) == [0xAA, 0xBB])
        #expect(p.paddingCount == 3)
        #expect(p.serialized() == bytes)
    }

    @Test func oneByteExtension() throws {
        let bytes = hex("90 60 00 05 | 00 00 00 00 | 00 00 00 01 | BE DE 00 02 | 10 AB 21 CD EF 00 00 00 | FF")
        let p = try RTPPacket(parsing: bytes)
        #expect(p.headerExtension == .oneByte([
            RTPExtensionElement(id: 1, data: [0xAB]), RTPExtensionElement(id: 2, data: [0xCD, 0xEF]),
        ]))
        #expect(p.headerExtension?.element(id: 2) == [0xCD, 0xEF])
        #expect(p.headerExtension?.profile == 0xBEDE)
        #expect(Array(p.payload) == [0xFF])
        #expect(p.serialized() == bytes)
    }

    @Test func oneByteExtensionPaddingBetweenElementsAndID15() throws {
        // padding byte between elements, then id 15 stops processing (RFC 8285 §4.2)
        let bytes = hex("90 60 00 05 | 00 00 00 00 | 00 00 00 01 | BE DE 00 02 | 10 AB 00 F0 21 CD EF 00")
        let p = try RTPPacket(parsing: bytes)
        #expect(p.headerExtension == .oneByte([RTPExtensionElement(id: 1, data: [0xAB])]))
        #expect(p.payload.isEmpty)
    }

    @Test func twoByteExtension() throws {
        let bytes = hex("90 60 00 06 | 00 00 00 00 | 00 00 00 01 | 10 03 00 02 | 05 00 07 03 01 02 03 00 | 42")
        let p = try RTPPacket(parsing: bytes)
        #expect(p.headerExtension == .twoByte(appBits: 3, [
            RTPExtensionElement(id: 5, data: []), RTPExtensionElement(id: 7, data: [1, 2, 3]),
        ]))
        #expect(p.headerExtension?.profile == 0x1003)
        #expect(Array(p.payload) == [0x42])
        #expect(p.serialized() == bytes)
    }

    @Test func opaqueExtension() throws {
        let bytes = hex("90 00 00 07 | 00 00 00 00 | 00 00 00 01 | 12 34 00 01 | DE AD BE EF")
        let p = try RTPPacket(parsing: bytes)
        #expect(p.headerExtension == .other(profile: 0x1234, data: [0xDE, 0xAD, 0xBE, 0xEF]))
        #expect(p.headerExtension?.elements == [])
        #expect(p.payload.isEmpty)
        #expect(p.serialized() == bytes)
    }

    @Test func parseFromSliceAndRawBuffer() throws {
        let bytes = hex("00 00 | 80 08 12 34 | 00 00 03 e8 | de ad be ef | 01 02 03")
        let p = try RTPPacket(parsing: bytes[2...])
        #expect(Array(p.payload) == [1, 2, 3])
        let q = try bytes.dropFirst(2).withUnsafeBytes { try RTPPacket(parsing: $0) }
        #expect(p == q)
        // offsets in errors count from the slice's start
        do {
            _ = try RTPPacket(parsing: hex("00 00 40 00 00 00 00 00 00 00 00 00 00 00")[2...])
            Issue.record("expected an error")
        } catch {
            #expect(error == RTPParseError(offset: 0, rule: .version))
        }
    }

    @Test func builtPacketsRoundTrip() throws {
        let packets = [
            RTPPacket(payloadType: 0, sequenceNumber: 65535, timestamp: .max, ssrc: 7, payload: [1, 2, 3, 4][...]),
            RTPPacket(marker: true, payloadType: 127, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                      csrcs: Array(1...15), paddingCount: 255),
            RTPPacket(payloadType: 111, sequenceNumber: 9, timestamp: 9, ssrc: 9,
                      headerExtension: .oneByte([RTPExtensionElement(id: 14, data: Array(repeating: 9, count: 16))]),
                      payload: [0][...], paddingCount: 1),
            RTPPacket(payloadType: 111, sequenceNumber: 9, timestamp: 9, ssrc: 9,
                      headerExtension: .twoByte(appBits: 0, [RTPExtensionElement(id: 255, data: Array(repeating: 1, count: 255))])),
            RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 1, headerExtension: .oneByte([])),
        ]
        for p in packets {
            let bytes = try #require(p.serialized())
            let q = try RTPPacket(parsing: bytes)
            #expect(q == p)
            #expect(q.serialized() == bytes)
        }
    }

    @Test func unencodablePacketsAreRefused() {
        #expect(RTPPacket(payloadType: 128, sequenceNumber: 0, timestamp: 0, ssrc: 0).serialized() == nil)
        #expect(RTPPacket(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0, csrcs: Array(0...15)).serialized() == nil)
        #expect(RTPPacket(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                          headerExtension: .oneByte([RTPExtensionElement(id: 15, data: [1])])).serialized() == nil)
        #expect(RTPPacket(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                          headerExtension: .oneByte([RTPExtensionElement(id: 1, data: [])])).serialized() == nil)
        #expect(RTPPacket(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                          headerExtension: .twoByte(appBits: 0, [RTPExtensionElement(id: 0, data: [])])).serialized() == nil)
        #expect(RTPPacket(payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0,
                          headerExtension: .other(profile: 1, data: [1, 2])).serialized() == nil)
    }

    @Test func malformedPackets() {
        expectRTPError(hex("80 00"), .truncatedHeader, at: 2)
        expectRTPError(hex("80 00 00 00 00 00 00 00 00 00 00"), .truncatedHeader, at: 11)
        expectRTPError(hex("40 00 00 00 00 00 00 00 00 00 00 00"), .version, at: 0)
        expectRTPError(hex("C0 00 00 00 00 00 00 00 00 00 00 00"), .version, at: 0)
        // CC = 3 but one CSRC present
        expectRTPError(hex("83 00 00 00 00 00 00 00 00 00 00 00 | 00 00 00 01"), .csrcCount, at: 0)
        // X set, only 2 bytes of extension header
        expectRTPError(hex("90 00 00 00 00 00 00 00 00 00 00 00 | BE DE"), .extensionHeader, at: 12)
        // extension of 5 words, 1 present
        expectRTPError(hex("90 00 00 00 00 00 00 00 00 00 00 00 | BE DE 00 05 | 10 AA 00 00"), .extensionLength, at: 14)
        // extension after one CSRC: offset of the length field moves by 4
        expectRTPError(hex("91 00 00 00 00 00 00 00 00 00 00 00 | 00 00 00 09 | BE DE 00 02 | 00 00 00 00"), .extensionLength, at: 18)
        // one-byte element of 16 bytes in a 4-byte block
        expectRTPError(hex("90 00 00 00 00 00 00 00 00 00 00 00 | BE DE 00 01 | 1F AA 00 00"), .extensionElement, at: 16)
        // two-byte element announcing 9 bytes in a 4-byte block
        expectRTPError(hex("90 00 00 00 00 00 00 00 00 00 00 00 | 10 00 00 01 | 00 01 09 AA"), .extensionElement, at: 17)
        // two-byte element header cut by the block's end
        expectRTPError(hex("90 00 00 00 00 00 00 00 00 00 00 00 | 10 00 00 01 | 00 00 00 01"), .extensionElement, at: 19)
        // padding count larger than the payload
        expectRTPError(hex("A0 00 00 00 00 00 00 00 00 00 00 00 | 01 10"), .padding, at: 13)
        // padding count zero
        expectRTPError(hex("A0 00 00 00 00 00 00 00 00 00 00 00 | 01 00"), .padding, at: 13)
        // padding bit with no byte after the header
        expectRTPError(hex("A0 00 00 00 00 00 00 00 00 00 00 01"), .padding, at: 11)
        // padding may not eat into the CSRC list
        expectRTPError(hex("A1 00 00 00 00 00 00 00 00 00 00 00 | 00 00 00 04"), .padding, at: 15)
    }

    @Test func paddingCoveringWholePayload() throws {
        let p = try RTPPacket(parsing: hex("A0 00 00 00 00 00 00 00 00 00 00 00 | 00 00 00 04"))
        #expect(p.payload.isEmpty)
        #expect(p.paddingCount == 4)
    }

    @Test func demultiplexing() {
        #expect(RTPDemultiplexer.classify(hex("80 00 00 01")) == .rtp)
        #expect(RTPDemultiplexer.classify(hex("80 E0 00 01")) == .rtp)  // PT 96 with marker
        #expect(RTPDemultiplexer.classify(hex("80 BF 00 01")) == .rtp)  // PT 63 with marker
        #expect(RTPDemultiplexer.classify(hex("80 C0 00 01")) == .rtcp)  // 192
        #expect(RTPDemultiplexer.classify(hex("80 C8 00 06")) == .rtcp)  // SR
        #expect(RTPDemultiplexer.classify(hex("81 CF 00 06")) == .rtcp)  // XR
        #expect(RTPDemultiplexer.classify(hex("80 DF 00 06")) == .rtcp)  // 223
        #expect(RTPDemultiplexer.classify(hex("80 E0")) == .rtp)
        #expect(RTPDemultiplexer.classify(hex("00 01 00 00")) == .other)  // STUN
        #expect(RTPDemultiplexer.classify(hex("16 FE FD")) == .other)  // DTLS
        #expect(RTPDemultiplexer.classify(hex("80")) == .other)
        #expect(RTPDemultiplexer.classify([UInt8]()) == .other)
    }
}
