// libFuzzer entry point for the RTP/RTCP paths of `capture --rtp`: the input is cut into
// datagrams (a length byte, a byte choosing source and destination among three endpoints, then
// the payload), fed to an RTPStreamAnalyzer that keeps payloads (one endpoint announced with
// PCMU, PCMA, telephone-event and Opus formats), which must account for every packet it took
// and report finite figures. The same datagrams go to a second analyzer through the fast path
// (RTP-looking ones lent in place as a BorrowedDatagram), which must find the same streams
// with the same figures, field for field. Built by scripts/fuzz with NetworkIO (IPAddress.swift), SIPMessage,
// SDP, PacketCapture, RTP and Media as modules, then CaptureAnalysis (without its audio export,
// which needs libopus) with this file.
import NetworkIO
import PacketCapture

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTPAnalysis(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let ends = [CaptureEndpoint(address: IPAddress("10.0.0.1")!, port: 4000), CaptureEndpoint(address: IPAddress("10.0.0.2")!, port: 6000),
                CaptureEndpoint(address: IPAddress("2001:db8::1")!, port: 6001)]
    var r = RTPStreamAnalyzer(keepPayloads: true)
    var fast = RTPStreamAnalyzer(keepPayloads: true)
    let media = (CaptureAnalyzer.MediaStream(media: "audio", address: "10.0.0.2", port: 6000, rtcpAddress: "10.0.0.2", rtcpPort: 6001, rtcpMux: false,
                                           announcedBy: ends[1], rtpPackets: 0, rtcpPackets: 0,
                                           formats: [.staticFormat(0)!, .staticFormat(8)!,
                                                     RTPPayloadFormat(payloadType: 101, name: "telephone-event", clockRate: 8000),
                                                     RTPPayloadFormat(payloadType: 111, name: "opus", clockRate: 48000, channels: 2)]))
    r.announce(media, callID: "fuzz")
    fast.announce(media, callID: "fuzz")
    var i = 0, frame = 0, taken = 0
    while i + 2 <= bytes.count {
        let n = Int(bytes[i]), route = Int(bytes[i + 1])
        i += 2
        let payload = bytes[i..<min(i + n, bytes.count)]
        i += payload.count
        frame += 1
        let t = CaptureTimestamp(seconds: 1_700_000_000 + Int64(route >> 6), nanoseconds: Int64(frame) * 20_000_000)
        let d = CapturedDatagram(timestamp: t, source: ends[route % 3], destination: ends[(route / 3) % 3], frameNumber: frame,
                                 length: payload.count, kind: CapturedDatagram.classify(payload), payload: payload)
        let general = r.add(d)
        if general != nil { taken += 1 }
        let lent: Int?
        if d.kind == .rtp {
            lent = payload.withUnsafeBytes { fast.add(BorrowedDatagram(timestamp: t, source: d.source, destination: d.destination, frameNumber: frame, payload: $0)) }
        } else {
            lent = fast.add(d)
        }
        if lent != general { fatalError("frame \(frame): stream \(String(describing: general)) by the general path, \(String(describing: lent)) by the fast path") }
    }
    r.finish()
    fast.finish()
    if r.streams.map({ String(describing: $0) }) != fast.streams.map({ String(describing: $0) }) || r.calls != fast.calls
        || r.rtcpPackets != fast.rtcpPackets || r.unmatchedReportBlocks != fast.unmatchedReportBlocks
        || r.payloads.map({ $0.map(\.payload) }) != fast.payloads.map({ $0.map(\.payload) }) {
        fatalError("the fast path differs:\n\(r.streams)\n\(fast.streams)")
    }
    let held = r.streams.filter { !$0.announced }.count * (r.heuristicPackets - 1)
    if r.streams.reduce(0, { $0 + $1.packets }) != taken + held { fatalError("packets counted \(r.streams.map(\.packets)) for \(taken) taken") }
    for s in r.streams {
        for v in [s.minDelta, s.meanDelta, s.maxDelta, s.minJitter, s.meanJitter, s.maxJitter, s.mos] where !(v?.isFinite ?? true) {
            fatalError("a figure is not finite: \(s)")
        }
        if s.dtmf.count > s.packets { fatalError("more digits than packets") }
    }
    return 0
}
