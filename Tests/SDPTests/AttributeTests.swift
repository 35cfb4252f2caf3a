import SDP
import Testing

@Suite("Typed attributes")
struct AttributeTests {
    private func media(_ attributes: String...) throws -> MediaDescription {
        let session = try parseOK(sdp(minimalLines + attributes))
        return try #require(session.media.first)
    }

    // MARK: rtpmap

    @Test func rtpmapParsesAndPrints() throws {
        let map = try #require(RTPMap(attributeValue: "111 opus/48000/2"))
        #expect(map == RTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2))
        #expect(map.attributeValue == "111 opus/48000/2")
        #expect(RTPMap(attributeValue: "0 PCMU/8000")?.channels == nil)
        #expect(RTPMap(attributeValue: "0 PCMU/8000")?.attributeValue == "0 PCMU/8000")
        #expect(RTPMap(attributeValue: "0 PCMU") == nil)
        #expect(RTPMap(attributeValue: "x PCMU/8000") == nil)
        #expect(RTPMap(attributeValue: "0 PCMU/8000/1/2") == nil)
        #expect(RTPMap(attributeValue: "") == nil)
        #expect(RTPMap(attributeValue: "0 PCMU/8000 ")?.clockRate == 8000)
    }

    @Test func rtpmapMatchingIgnoresCaseAndPayloadType() {
        let a = RTPMap(payloadType: 96, encodingName: "OPUS", clockRate: 48000, channels: 2)
        let b = RTPMap(payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2)
        #expect(a.matches(b))
        #expect(!a.matches(RTPMap(payloadType: 96, encodingName: "opus", clockRate: 48000)))
        #expect(RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 8000, channels: 1)
            .matches(RTPMap(payloadType: 0, encodingName: "pcmu", clockRate: 8000)))
        #expect(!RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 8000)
            .matches(RTPMap(payloadType: 0, encodingName: "PCMU", clockRate: 16000)))
    }

    @Test(arguments: [
        (UInt8(0), "PCMU", UInt32(8000)), (3, "GSM", 8000), (4, "G723", 8000), (8, "PCMA", 8000),
        (9, "G722", 8000), (13, "CN", 8000), (18, "G729", 8000), (34, "H263", 90000),
    ])
    func staticPayloadTypes(payloadType: UInt8, name: String, clockRate: UInt32) throws {
        let map = try #require(RTPMap.staticPayloadType(payloadType))
        #expect(map.payloadType == payloadType)
        #expect(map.encodingName == name)
        #expect(map.clockRate == clockRate)
    }

    @Test func unassignedAndDynamicPayloadTypesHaveNoStaticCodec() {
        for pt: UInt8 in [1, 2, 19, 20, 35, 72, 95, 96, 101, 127] {
            #expect(RTPMap.staticPayloadType(pt) == nil, "payload type \(pt)")
        }
        #expect(RTPMap.staticPayloadType(10)?.channels == 2)
    }

    @Test func codecLookupPrefersRTPMapOverStaticTable() throws {
        let m = try media("a=rtpmap:8 PCMA/16000")
        #expect(m.codec(forPayloadType: 8)?.clockRate == 16000)
        #expect(m.codec(forPayloadType: 0)?.encodingName == "PCMU")
        #expect(m.codec(forPayloadType: 96) == nil)
    }

    // MARK: fmtp

    @Test func fmtpParameters() throws {
        let fmtp = try #require(FormatParameters(attributeValue: "111 minptime=10; useinbandfec=1;;x=a=b;flag"))
        #expect(fmtp.format == "111")
        #expect(fmtp.payloadType == 111)
        #expect(fmtp.parameters == "minptime=10; useinbandfec=1;;x=a=b;flag")
        #expect(fmtp.parsedParameters == [
            .init(name: "minptime", value: "10"), .init(name: "useinbandfec", value: "1"),
            .init(name: "x", value: "a=b"), .init(name: "flag"),
        ])
        #expect(fmtp.value(forParameter: "USEINBANDFEC") == "1")
        #expect(fmtp.value(forParameter: "flag") == nil)
        #expect(fmtp.value(forParameter: "missing") == nil)
        #expect(FormatParameters(attributeValue: "101")?.parameters == "")
        #expect(FormatParameters(attributeValue: "t38 x")?.payloadType == nil)
        #expect(FormatParameters(attributeValue: " 0-15") == nil)
        #expect(FormatParameters(payloadType: 111, parameters: [.init(name: "stereo", value: "1"), .init(name: "cbr", value: "0")])
            .attributeValue == "111 stereo=1;cbr=0")
    }

    // MARK: ssrc

    @Test func ssrcAttributes() throws {
        let m = try media("a=ssrc:1 cname:host:port", "a=ssrc:4294967295 msid:stream track", "a=ssrc:7 label")
        #expect(m.ssrcs == [
            SSRCAttribute(ssrc: 1, name: "cname", value: "host:port"),
            SSRCAttribute(ssrc: 4_294_967_295, name: "msid", value: "stream track"),
            SSRCAttribute(ssrc: 7, name: "label"),
        ])
        #expect(m.cname(forSSRC: 1) == "host:port")
        #expect(m.cname(forSSRC: 7) == nil)
        #expect(SSRCAttribute(ssrc: 7, name: "label").attributeValue == "7 label")
        #expect(SSRCAttribute(attributeValue: "12 :x") == nil)
    }

    // MARK: rtcp and rtcp-mux

    @Test func rtcpAttribute() throws {
        #expect(RTCPAttribute(attributeValue: "53020") == RTCPAttribute(port: 53020))
        #expect(RTCPAttribute(attributeValue: "53020 IN IP6 2001:db8::5")?.connection == .ip6("2001:db8::5"))
        #expect(RTCPAttribute(attributeValue: "53020 IN IP4 host.example.com")?.connection?.address == "host.example.com")
        #expect(RTCPAttribute(attributeValue: "53020 IN") == nil)
        #expect(RTCPAttribute(attributeValue: "-1") == nil)
        #expect(RTCPAttribute(port: 9, connection: .ip4("0.0.0.0")).attributeValue == "9 IN IP4 0.0.0.0")
    }

    @Test func rtcpMuxToggle() throws {
        var m = try media()
        #expect(!m.isRTCPMuxed)
        m.setRTCPMux(true)
        m.setRTCPMux(true)
        #expect(m.isRTCPMuxed)
        #expect(m.attributes(named: "rtcp-mux").count == 1)
        m.setRTCPMux(false)
        #expect(!m.isRTCPMuxed)
        #expect(!m.hasAttribute(named: "rtcp-mux"))
    }

    // MARK: direction

    @Test func directionDefaultsAndFallback() throws {
        let plain = try parseOK(sdp(minimalLines))
        #expect(plain.direction == nil)
        #expect(plain.media[0].direction == nil)
        #expect(plain.effectiveDirection(for: plain.media[0]) == .sendrecv)

        var lines = minimalLines
        lines.insert("a=inactive", at: 5)
        let sessionLevel = try parseOK(sdp(lines + ["a=sendonly"]))
        #expect(sessionLevel.direction == .inactive)
        #expect(sessionLevel.effectiveDirection(for: sessionLevel.media[0]) == .sendonly)
        var withoutMediaDirection = sessionLevel
        withoutMediaDirection.media[0].setDirection(nil)
        #expect(withoutMediaDirection.effectiveDirection(for: withoutMediaDirection.media[0]) == .inactive)
    }

    @Test func setDirectionReplacesInPlace() throws {
        var m = try media("a=ptime:20", "a=sendrecv", "a=x-foo", "a=recvonly", "a=maxptime:40")
        m.setDirection(.sendonly)
        #expect(m.attributes.map(\.description) == ["rtpmap:0 PCMU/8000", "ptime:20", "sendonly", "x-foo", "maxptime:40"])
        #expect(m.direction == .sendonly)
        m.setDirection(nil)
        #expect(m.direction == nil)
        #expect(m.attributes.count == 4)
        m.setDirection(.inactive)
        #expect(m.attributes.last == SDPAttribute(name: "inactive"))
    }

    @Test func directionHelpers() {
        #expect(MediaDirection.sendonly.reversed == .recvonly)
        #expect(MediaDirection.recvonly.reversed == .sendonly)
        #expect(MediaDirection.sendrecv.reversed == .sendrecv)
        #expect(MediaDirection.inactive.reversed == .inactive)
        #expect(MediaDirection.allCases.filter(\.sends) == [.sendrecv, .sendonly])
        #expect(MediaDirection.allCases.filter(\.receives) == [.sendrecv, .recvonly])
    }

    // MARK: ptime

    @Test func packetTimes() throws {
        var m = try media("a=ptime:22.5", "a=maxptime:60")
        #expect(m.ptime == 22.5)
        #expect(m.maxptime == 60)
        m.setPtime(30)
        #expect(m.ptime == 30)
        #expect(m.attributes(named: "ptime") == [SDPAttribute(name: "ptime", value: "30")])
        m.setPtime(nil)
        #expect(m.ptime == nil)
    }

    // MARK: generic attributes

    @Test func propertyValueAndEmptyValueAttributesStayDistinct() throws {
        let text = sdp(minimalLines + ["a=foo", "a=foo:", "a=foo:bar:baz", "a=foo: spaced "])
        let m = try #require(try parseOK(text).media.first)
        #expect(m.attributes(named: "foo").map(\.value) == [nil, "", "bar:baz", " spaced "])
        #expect(try parseOK(text).description == text)
    }

    @Test func trailingWhitespaceAfterPropertyAttributeIsIgnored() throws {
        let m = try media("a=sendonly \t")
        #expect(m.direction == .sendonly)
        #expect(m.attributes.last == SDPAttribute(name: "sendonly"))
    }

    @Test func setAndRemoveAttributes() throws {
        var m = try media("a=x:1", "a=y", "a=x:2")
        m.setAttribute(SDPAttribute(name: "x", value: "3"))
        #expect(m.attributes.map(\.description) == ["rtpmap:0 PCMU/8000", "x:3", "y"])
        #expect(m.removeAttributes(named: "y") == 1)
        #expect(m.removeAttributes(named: "nope") == 0)
        m.setAttribute(SDPAttribute(name: "z"))
        #expect(m.attributes.last?.name == "z")
        #expect(m.attributes.first?.decode(as: RTPMap.self)?.encodingName == "PCMU")
        #expect(m.attributes.first?.decode(as: CryptoAttribute.self) == nil)
    }

    @Test func typedAccessorsSkipHandBuiltGarbage() {
        var m = MediaDescription(media: .audio, port: 4000, proto: .rtpAVP, payloadTypes: [0])
        m.addAttribute(name: "rtpmap", value: "nonsense")
        m.addAttribute(name: "crypto", value: "1 X")
        m.addAttribute(name: "ptime", value: "soon")
        #expect(m.rtpmaps.isEmpty)
        #expect(m.cryptos.isEmpty)
        #expect(m.ptime == nil)
        #expect(m.codec(forPayloadType: 0)?.encodingName == "PCMU")
    }
}
