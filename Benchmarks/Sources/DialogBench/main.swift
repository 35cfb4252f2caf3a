// Memory per established dialog, run by scripts/bench-dialogs (release build).
//
// Usage: DialogBench [--dialogs N] [--record-route] [--no-100rel]
//
// Two SessionManagers (a UAC side and a UAS side) talk to each other in memory, without
// sockets: every message is serialized and parsed again on the other side, as on the wire, so
// what a session keeps is what it would keep from a real network. Each call goes INVITE (with a
// ~300-byte SDP offer) → 180 → 200 (SDP answer, Session-Expires) → ACK and stays confirmed.
//
// Attribution: glibc's `mallinfo2().uordblks` (bytes in use) is read before the calls, after
// them (both sides alive), and after the UAC manager is dropped. Every transient (messages,
// action arrays) is freed by then, so the last difference is what the UAS manager retains for
// its dialogs; the difference between the last two is the UAC side. RSS is reported too, but
// it includes freed memory malloc keeps and the UAC side's holes, so it is only an upper bound.
//
// Prints one `key=value` line per figure.
import SIPDialog
import SIPMessage
import SIPTransaction
import CHeapStats
#if canImport(Glibc)
import Glibc
#endif

func fail(_ s: String) -> Never {
    let text = "DialogBench: \(s)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

var dialogs = 100_000
var recordRoute = false
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--dialogs":
        guard let v = args.popFirst(), let n = Int(v), n > 0 else { fail("--dialogs needs a positive number") }
        dialogs = n
    case "--record-route":
        recordRoute = true
    default:
        fail("usage: DialogBench [--dialogs N] [--record-route]")
    }
}

func heapInUse() -> Int {
    Int(hs_heap_in_use())
}

func rssKiB() -> Int {
    guard let f = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, f) != nil {
        let s = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if s.hasPrefix("VmRSS:") {
            return Int(s.dropFirst(6).trimmingPrefix(while: { $0 == " " || $0 == "\t" }).prefix(while: \.isNumber)) ?? 0
        }
    }
    return 0
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// What crosses the wire: the serialized bytes, parsed again.
func carry(_ m: SIPMessage) -> SIPMessage {
    do { return try SIPMessage(bytes: m.serialized()) } catch { fail("a message did not parse again: \(error)") }
}

/// A typical audio offer (~300 bytes), with a per-call session id and port.
func offer(_ i: Int) -> SessionBody {
    let id = 3_900_000_000 + i
    let port = 20_000 + (i % 10_000) * 2
    return .sdp("""
    v=0\r
    o=alice \(id) \(id) IN IP4 192.0.2.10\r
    s=-\r
    c=IN IP4 192.0.2.10\r
    t=0 0\r
    m=audio \(port) RTP/AVP 0 8 9 18 101\r
    a=rtpmap:0 PCMU/8000\r
    a=rtpmap:8 PCMA/8000\r
    a=rtpmap:9 G722/8000\r
    a=rtpmap:18 G729/8000\r
    a=fmtp:18 annexb=no\r
    a=rtpmap:101 telephone-event/8000\r
    a=fmtp:101 0-16\r
    a=ptime:20\r
    a=sendrecv\r

    """)
}

func answer(_ i: Int) -> SessionBody {
    let id = 1_700_000_000 + i
    let port = 30_000 + (i % 10_000) * 2
    return .sdp("""
    v=0\r
    o=switchboard \(id) \(id) IN IP4 192.0.2.20\r
    s=-\r
    c=IN IP4 192.0.2.20\r
    t=0 0\r
    m=audio \(port) RTP/AVP 0 101\r
    a=rtpmap:0 PCMU/8000\r
    a=rtpmap:101 telephone-event/8000\r
    a=fmtp:101 0-16\r
    a=ptime:20\r
    a=sendrecv\r

    """)
}

func session(_ out: [SessionManager.Output]) -> [InviteSession.Action] {
    out.compactMap { if case .session(_, let a) = $0 { return a } else { return nil } }
}

func sent(_ out: [SessionManager.Output]) -> [SIPMessage] {
    session(out).compactMap { if case .send(let m) = $0 { return m } else { return nil } }
}

func responses(_ out: [SessionManager.Output]) -> [SIPMessage] {
    session(out).compactMap { if case .respond(let m, _) = $0 { return m } else { return nil } }
}

do {
    let uacConfig = InviteSessionConfiguration(
        localParty: try NameAddress("\"Alice\" <sip:alice@caller.example>"), contact: try NameAddress("<sip:alice@192.0.2.10:5060>"),
        viaSentBy: "192.0.2.10:5060", reliableProvisional: .unsupported, userAgent: "Switchboard-bench-uac")
    let uasConfig = InviteSessionConfiguration(
        localParty: try NameAddress("<sip:pbx@callee.example>"), contact: try NameAddress("<sip:pbx@192.0.2.20:5060>"),
        viaSentBy: "192.0.2.20:5060", userAgent: "Switchboard-bench-uas")
    var uac = SessionManager(configuration: uacConfig, seed: 1)
    var uas = SessionManager(configuration: uasConfig, seed: 2)
    let targets = (0..<10).map { k in (try? NameAddress("<sip:+1555010\(k)@callee.example>")) ?? NameAddress(uri: .other(scheme: "sip", text: "x")) }
    var firstKey: SessionKey?

    func placeCall(_ i: Int) {
        let (_, out) = uac.call(targets[i % targets.count], offer: offer(i))
        guard var invite = sent(out).first else { fail("no INVITE") }
        if recordRoute {
            // A proxy on the path (two Record-Route entries, as a load-balanced pair would add).
            try? invite.prepend(.recordRoute, "<sip:192.0.2.30;lr;ftag=\(invite.fromTag ?? "")>")
            try? invite.prepend(.recordRoute, "<sip:192.0.2.31;lr;ftag=\(invite.fromTag ?? "")>")
        }
        let tx = TransactionID(rawValue: UInt64(i))
        let o1 = uas.request(carry(invite), transaction: tx)
        guard let key = o1.compactMap({ if case .incomingCall(let k, _) = $0 { return k } else { return nil } }).first else {
            fail("the UAS did not take call \(i): \(o1)")
        }
        if firstKey == nil { firstKey = key }
        let ringing = (try? uas.perform(key) { s throws(SessionError) in try s.provisional(180) }) ?? []
        for r in responses(ringing) { _ = uac.response(carry(r)) }
        let accepted = (try? uas.perform(key) { s throws(SessionError) in try s.accept(body: answer(i)) }) ?? []
        guard let ok = responses(accepted).first else { fail("no 200 for call \(i)") }
        let afterOK = uac.response(carry(ok))
        guard let ack = sent(afterOK).first(where: { $0.method == .ack }) else { fail("no ACK for call \(i)") }
        _ = uas.ack(carry(ack))
        guard uas[key]?.state == .confirmed else { fail("call \(i) is not confirmed at the UAS: \(String(describing: uas[key]?.state))") }
    }

    // Warm up (lazily built tables, metadata), then forget those calls.
    for i in 0..<200 { placeCall(i) }
    uac = SessionManager(configuration: uacConfig, seed: 1)
    uas = SessionManager(configuration: uasConfig, seed: 2)
    firstKey = nil

    hs_trim()
    let heap0 = heapInUse(), rss0 = rssKiB()
    let t0 = now()
    for i in 0..<dialogs { placeCall(i) }
    let t1 = now()
    let heap1 = heapInUse(), rss1 = rssKiB()
    guard uas.count == dialogs, uac.count == dialogs else { fail("expected \(dialogs) sessions per side, got uas=\(uas.count) uac=\(uac.count)") }
    uac = SessionManager(configuration: uacConfig, seed: 3)
    hs_trim()
    let heap2 = heapInUse(), rss2 = rssKiB()
    guard uas.count == dialogs, let k = firstKey, uas[k]?.state == .confirmed else { fail("the UAS lost its dialogs") }

    let uasBytes = Double(heap2 - heap0) / Double(dialogs)
    let uacBytes = Double(heap1 - heap2) / Double(dialogs)
    func f(_ d: Double) -> String { String(Int(d.rounded())) }
    print("dialogs=\(dialogs) record_route=\(recordRoute)")
    print("uas_bytes_per_dialog=\(f(uasBytes))")
    print("uac_bytes_per_dialog=\(f(uacBytes))")
    print("both_sides_bytes_per_dialog=\(f(Double(heap1 - heap0) / Double(dialogs)))")
    print("rss_kib_before=\(rss0) rss_kib_both=\(rss1) rss_kib_uas_only=\(rss2) rss_bytes_per_dialog_both=\(f(Double(rss1 - rss0) * 1024 / Double(dialogs)))")
    print("calls_per_second_in_memory=\(f(Double(dialogs) / (t1 - t0)))")
    print("inline_size_InviteSession=\(MemoryLayout<InviteSession>.size) inline_size_Dialog=\(MemoryLayout<Dialog>.size) inline_size_SessionKey=\(MemoryLayout<SessionKey>.size)")
} catch {
    fail("setup: \(error)")
}
