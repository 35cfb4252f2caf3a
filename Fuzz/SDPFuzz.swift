// libFuzzer entry point for the SDP parser: parse, read the typed attributes, serialize,
// re-parse. Compiled together with Sources/SDP by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSDP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let s = try? SessionDescription.parse(bytes) else { return 0 }
    let out = s.serialized()
    guard let again = try? SessionDescription.parse(out) else { fatalError("serialized SDP does not parse") }
    guard again == s else { fatalError("parse ∘ serialize is not a fixed point") }
    return 0
}
