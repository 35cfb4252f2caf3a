// libFuzzer entry point for the DNS message codec: parse, then encode (compressed and not) and
// re-parse, which must give the same message. Compiled with the codec's files of
// Sources/SIPResolver as one module, over Sources/NetworkIO/IPAddress.swift built as the
// module NetworkIO (scripts/fuzz dns does both):
//   swiftc ... -module-name NetworkIO -emit-module ... -c Sources/NetworkIO/IPAddress.swift -o fuzz-out/dns/NetworkIO.o
//   swiftc -O -g -swift-version 6 -sanitize=fuzzer,address -parse-as-library -module-name FuzzDNS \
//     Sources/SIPResolver/{DNSName,DNSRecordType,DNSRecord,DNSMessage,DNSParseError}.swift \
//     Sources/SIPResolver/DNSMessage+{Decoding,Encoding}.swift Fuzz/DNSMessageFuzz.swift \
//     -I fuzz-out/dns fuzz-out/dns/NetworkIO.o -o fuzz-out/dns/fuzzer
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDNSMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let m = try? DNSMessage(bytes: bytes) else { return 0 }
    for compress in [true, false] {
        guard let wire = try? m.encoded(compressNames: compress) else { continue }
        guard let again = try? DNSMessage(bytes: wire), again == m else { fatalError("encode → parse is not the identity") }
    }
    for r in m.answers + m.authorities + m.additionals { _ = r.description }
    for q in m.questions { if let n = try? DNSName(q.name.description), n != q.name { fatalError("name text does not round-trip") } }
    return 0
}
