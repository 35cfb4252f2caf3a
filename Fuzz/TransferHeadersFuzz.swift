// libFuzzer entry point for the transfer headers: the message/sipfrag status line of REFER's
// NOTIFYs (SIPFragStatus), Replaces (RFC 3891) and a Refer-To with an embedded, escaped
// Replaces. Each must throw a typed error or give a value that survives serialize → parse.
// Compiled together with Sources/SIPMessage by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTransferHeaders(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let status = try? SIPFragStatus(parsing: bytes) {
        guard (100...699).contains(status.statusCode) else { fatalError("status code out of range") }
        // The reason phrase is kept as written; a well-formed one (no line breaks) reads back.
        if !status.reasonPhrase.utf8.contains(where: { $0 == 13 || $0 == 10 }), !status.reasonPhrase.hasPrefix(" "), !status.reasonPhrase.hasPrefix("\t") {
            guard let again = try? SIPFragStatus(parsing: status.bytes), again.statusCode == status.statusCode else {
                fatalError("a sipfrag status line does not read back")
            }
        }
    }
    let text = String(decoding: bytes, as: UTF8.self)
    if let r = try? Replaces(text) {
        guard let again = try? Replaces(r.description), again.callID == r.callID, again.toTag == r.toTag,
              again.fromTag == r.fromTag, again.earlyOnly == r.earlyOnly else { fatalError("Replaces does not survive serialize → parse") }
    }
    // As the header value of a REFER: Refer-To with the input as the escaped Replaces value.
    var target = SIPURI(user: "c", host: .ipv4("192.0.2.3"))
    target.headers = [SIPParameter(name: "Replaces", value: text)]
    if var m = try? SIPMessage(method: .refer, requestURI: "sip:b@192.0.2.2"),
       (try? m.append(.referTo, "<\(target)>")) != nil,
       let parsed = try? SIPMessage(bytes: m.serialized()) {
        // What was escaped on the way out is unescaped on the way in.
        if let r = try? Replaces(text), let back = try? parsed.referToReplaces() {
            guard back.callID == r.callID, back.toTag == r.toTag, back.fromTag == r.fromTag else { fatalError("Refer-To lost its Replaces") }
        }
    }
    return 0
}
