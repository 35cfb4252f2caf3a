// libFuzzer entry point for the SIP parser: parse, decode every header, validate, serialize,
// re-parse; and the digest scanner of capture summaries against the parser. Compiled together with Sources/SIPMessage by scripts/fuzz (one module, no import).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSIPParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // The capture summary's scanner must take and refuse what the parser does (same error), with
    // the fields of the parsed message.
    var parsed: SIPMessage?
    var parseError: SIPParseError?
    do throws(SIPParseError) { parsed = try SIPMessage(bytes: bytes) } catch { parseError = error }
    var scanner = SIPDigestScanner()
    do throws(SIPParseError) {
        let d = try scanner.digest(datagram: bytes[...]) { _ in true }
        guard let p = parsed else { fatalError("the digest scanner took what the parser refused: \(String(describing: parseError))") }
        if d != SIPMessageDigest(p) { fatalError("the digest scanner's fields differ from the message's") }
    } catch {
        if error != parseError { fatalError("the digest scanner refused with \(error), the parser with \(String(describing: parseError))") }
    }
    guard let m = parsed else { return 0 }
    _ = try? m.validate()
    _ = try? m.via(); _ = try? m.from(); _ = try? m.to(); _ = try? m.contact(); _ = try? m.route()
    _ = try? m.recordRoute(); _ = try? m.wwwAuthenticate(); _ = try? m.authorization()
    _ = try? m.referTo(); _ = try? m.referToReplaces(); _ = try? m.replaces(); _ = try? m.event()
    _ = try? m.subscriptionState(); _ = try? m.reason(); _ = try? m.retryAfter(); _ = try? m.sessionExpires()
    _ = try? m.rseq(); _ = try? m.rack(); _ = try? m.multipartParts(); _ = try? m.diversion()
    _ = try? m.requestURI(); _ = try? m.allow(); _ = try? m.supported(); _ = try? m.contentType()
    _ = m.topViaBranchBytes; _ = m.fromTagBytes; _ = m.toTagBytes; _ = m.headerFields
    let out = m.serialized()
    guard let again = try? SIPMessage(bytes: out), again.serialized() == out else { fatalError("pristine serialization does not re-parse to itself") }
    let canon = m.serializedCanonically()
    guard let c = try? SIPMessage(bytes: canon), c.serializedCanonically() == canon else { fatalError("canonical form is not a fixed point") }
    return 0
}
