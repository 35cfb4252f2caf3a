// libFuzzer entry point for the capture reader and decoder: read every frame of the input as a
// pcap/pcapng file and decode it to SIP messages; a read error must come with a sane offset.
// Then read it again for datagrams, by the general path and by the RTP fast path
// (SIPCaptureReader.nextEvents(into:rtp:)): the same datagrams, messages and anomalies in the
// same order, the same counters and the same error.
// Built by scripts/fuzz (SIPMessage as its own module, then PacketCapture with this file).
import SIPMessage

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCapture(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let reader: CaptureFileReader
    do {
        reader = try CaptureFileReader(bytes: bytes)
    } catch {
        if error.offset < 0 || error.offset > size { fatalError("error offset \(error.offset) outside the input") }
        return 0
    }
    var decoder = CaptureDecoder()
    var frames = 0
    while true {
        do {
            guard let frame = try reader.nextFrame() else { break }
            frames += 1
            if frames > size + 1 { fatalError("more frames than bytes") }
            _ = decoder.decode(frame)
        } catch {
            if error.offset < 0 || error.offset > size { fatalError("error offset \(error.offset) outside the input") }
            break
        }
    }
    _ = decoder.finish()
    let general = readDatagrams(bytes, fast: false), fast = readDatagrams(bytes, fast: true)
    if general.0 != fast.0 { fatalError("the fast path differs:\n\(general.0)\n\(fast.0)") }
    if general.1 != fast.1 { fatalError("counters differ:\n\(general.1)\n\(fast.1)") }
    if general.2 != fast.2 { fatalError("errors differ: \(String(describing: general.2)), \(String(describing: fast.2))") }
    return 0
}

func readDatagrams(_ bytes: [UInt8], fast: Bool) -> ([String], CaptureCounters, CaptureFileError?) {
    guard let reader = try? SIPCaptureReader(bytes: bytes, datagrams: true, payloads: true) else { return ([], CaptureCounters(), nil) }
    var seen: [String] = []
    func note(_ e: CaptureEvent) {
        switch e {
        case .datagram(let d):
            if d.kind == .rtp {
                seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) rtp \(Array(d.payload))")
            } else {
                seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) \(d.kind) \(d.payload.count)")
            }
        case .message(let m): seen.append("sip \(m.frameNumber) \(m.source) \(m.destination)")
        case .anomaly(let a): seen.append("\(a)")
        case .digest(let d): seen.append("digest \(d.frameNumber)")
        }
    }
    var events: [CaptureEvent] = []
    var failure: CaptureFileError?
    do throws(CaptureFileError) {
        if fast {
            while try reader.nextEvents(into: &events, rtp: { d in
                seen.append("\(d.frameNumber) \(d.timestamp) \(d.source) \(d.destination) rtp \(Array(d.payload))")
            }) { events.forEach(note) }
        } else {
            while try reader.nextEvents(into: &events) { events.forEach(note) }
        }
    } catch {
        failure = error
        var d = reader.decoder
        d.finish().forEach(note)
    }
    return (seen, reader.counters, failure)
}
