// libFuzzer entry point for the capture reader and decoder: read every frame of the input as a
// pcap/pcapng file and decode it to SIP messages; a read error must come with a sane offset.
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
    return 0
}
