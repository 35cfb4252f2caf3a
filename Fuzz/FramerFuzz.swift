// libFuzzer entry point for the stream framer: the first byte picks the mode and read size,
// the rest is the stream. Compiled together with Sources/SIPMessage by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFramer(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 1 else { return 0 }
    let control = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let limits = SIPParserLimits(maxMessageSize: 4096, maxHeaderCount: 64, maxLineLength: 1024, maxBodySize: 2048)
    var f = SIPStreamFramer(limits: limits, mode: control & 1 == 0 ? .strict : .resynchronizing)
    let chunk = Int(control >> 1) + 1
    var i = 0
    var framed = 0
    while i < bytes.count {
        let j = min(bytes.count, i + chunk)
        f.append(bytes[i..<j])
        i = j
        do {
            while let e = try f.next() {
                if case .message(let m) = e {
                    framed += 1
                    // A framed message parses again on its own to the same bytes.
                    guard let again = try? SIPMessage(bytes: m.serialized()), again.serialized() == m.serialized() else { fatalError("framed message does not re-parse") }
                }
                if framed > bytes.count { fatalError("more messages than bytes") }
            }
        } catch {
            break
        }
        if f.bufferedByteCount > 3 * limits.maxMessageSize { fatalError("framer buffered \(f.bufferedByteCount) bytes") }
    }
    return 0
}
