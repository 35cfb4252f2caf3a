// Per-step cost of what the live runtime does with each message of a call (issue 17): parse,
// validate, the header reads the layers make, building and serializing the answer. Prints, per
// step, nanoseconds and allocations per operation over a SIPp-like call (INVITE with SDP, ACK,
// BYE). Allocations are exact and repeatable (the malloc counter from scripts/bench-message-path
// is preloaded); the times are this machine's.
//
// Usage: MessagePathBench [--iterations N]
import SIPMessage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

var iterations = 200_000
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    if a == "--iterations", let v = args.popFirst(), let n = Int(v), n > 0 { iterations = n }
}

func message(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    for b in text.utf8 {
        if b == 0x0A { out.append(0x0D) }
        out.append(b)
    }
    return out
}

let sdp = "v=0\r\no=user1 53655765 2353687637 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
let invite = message("""
INVITE sip:service@127.0.0.1:5060 SIP/2.0
Via: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-4242-1-0
From: sipp <sip:sipp@127.0.0.1:5061>;tag=4242SIPpTag001
To: service <sip:service@127.0.0.1:5060>
Call-ID: 1-4242@127.0.0.1
CSeq: 1 INVITE
Contact: sip:sipp@127.0.0.1:5061
Max-Forwards: 70
Subject: Performance Test
Content-Type: application/sdp
Content-Length: \(sdp.utf8.count)


""") + Array(sdp.utf8)
let ack = message("""
ACK sip:service@127.0.0.1:5060 SIP/2.0
Via: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-4242-1-5
From: sipp <sip:sipp@127.0.0.1:5061>;tag=4242SIPpTag001
To: service <sip:service@127.0.0.1:5060>;tag=sb1
Call-ID: 1-4242@127.0.0.1
CSeq: 1 ACK
Contact: sip:sipp@127.0.0.1:5061
Max-Forwards: 70
Subject: Performance Test
Content-Length: 0


""")
let bye = message("""
BYE sip:service@127.0.0.1:5060 SIP/2.0
Via: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK-4242-1-7
From: sipp <sip:sipp@127.0.0.1:5061>;tag=4242SIPpTag001
To: service <sip:service@127.0.0.1:5060>;tag=sb1
Call-ID: 1-4242@127.0.0.1
CSeq: 2 BYE
Contact: sip:sipp@127.0.0.1:5061
Max-Forwards: 70
Subject: Performance Test
Content-Length: 0


""")

func fail(_ s: String) -> Never {
    let text = "MessagePathBench: \(s)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

let raw = [invite, ack, bye]
let parsed: [SIPMessage]
do { parsed = try raw.map { try SIPMessage(bytes: $0) } } catch { fail("the call's messages do not parse: \(error)") }
for m in parsed { do { try m.validate() } catch { fail("validate: \(error)") } }

typealias CountFn = @convention(c) () -> UInt64
let counter: CountFn? = dlsym(dlopen(nil, RTLD_NOW), "sb_malloc_count").map { unsafeBitCast($0, to: CountFn.self) }

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Runs `body` over the call's three messages `iterations` times; prints ns and allocations per
/// operation (one operation = one message).
@MainActor @inline(never)
func measure(_ name: String, _ body: (Int) -> Int) {
    var sink = 0
    for k in 0..<1000 { sink &+= body(k % 3) }
    let a0 = counter?() ?? 0
    let t0 = now()
    for k in 0..<iterations { sink &+= body(k % 3) }
    let t1 = now()
    let a1 = counter?() ?? 0
    let ns = Double(t1 - t0) / Double(iterations)
    let allocs = counter.map { _ in fixed(Double(a1 - a0) / Double(iterations), 1) } ?? "-"
    print(pad(name, 28) + pad(fixed(ns, 1), 10, left: true) + " ns/msg" + pad(allocs, 8, left: true) + " allocs/msg")
    if sink == 42 { print("") }
}

func fixed(_ v: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let r = (v * scale).rounded() / scale
    var text = "\(r)"
    if let dot = text.firstIndex(of: ".") {
        let frac = text[text.index(after: dot)...].count
        if frac < decimals { text += String(repeating: "0", count: decimals - frac) }
    }
    return text
}

func pad(_ s: String, _ width: Int, left: Bool = false) -> String {
    let fill = String(repeating: " ", count: max(0, width - s.count))
    return left ? fill + s : s + fill
}

print("MessagePathBench: \(iterations) operations per step over a SIPp-like INVITE (with SDP), ACK and BYE")
measure("parse") { k in (try? SIPMessage(bytes: raw[k]))?.headerCount ?? 0 }
measure("validate") { k in (try? parsed[k].validate()) == nil ? 0 : 1 }
measure("parse + validate") { k in
    guard let m = try? SIPMessage(bytes: raw[k]), (try? m.validate()) != nil else { return 0 }
    return 1
}
measure("topVia()") { k in (try? parsed[k].topVia())?.port.map(Int.init) ?? 0 }
measure("from() + to()") { k in ((try? parsed[k].from()) != nil ? 1 : 0) + ((try? parsed[k].to()) != nil ? 1 : 0) }
measure("contact()") { k in (try? parsed[k].contact()) == nil ? 0 : 1 }
measure("callID + cseq() + tags") { k in
    let m = parsed[k]
    return (m.callIDBytes?.count ?? 0) + Int((try? m.cseq())?.sequence ?? 0) + (m.fromTagBytes?.count ?? 0) + (m.toTagBytes?.count ?? 0)
}
measure("200 response + serialize") { k in
    var r = SIPMessage(responseTo: parsed[k], statusCode: 200, toTag: parsed[k].toTagBytes == nil ? "sb1" : nil)
    if k == 0 { try? r.append(.contact, "<sip:switchboard@127.0.0.1:5060>") }
    return r.serialized().count
}
