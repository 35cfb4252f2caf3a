// libFuzzer entry point for the RTP and RTCP parsers: whatever parses serializes and parses
// back to the same value. Compiled together with Sources/RTP by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let p = try? RTPPacket(parsing: bytes), let out = p.serialized() {
        guard let again = try? RTPPacket(parsing: out), again == p else { fatalError("RTP parse ∘ serialize is not a fixed point") }
    }
    for strict in [true, false] {
        if let c = try? RTCPCompoundPacket(parsing: bytes, requireLeadingReport: strict), let out = c.serialized() {
            guard let again = try? RTCPCompoundPacket(parsing: out, requireLeadingReport: strict), again == c else { fatalError("RTCP parse ∘ serialize is not a fixed point") }
        }
    }
    _ = RTPDemultiplexer.classify(bytes)
    return 0
}
