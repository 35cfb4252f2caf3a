// Parser throughput benchmark, run by scripts/bench beside three C parsers.
//
// Usage: SwitchboardBench --seconds S FILE...
// Prints: switchboard msgs_per_sec=<f> messages=<n> checksum=<c> cycle_checksum=<c> [allocs_per_msg=<f>]
// The checksum adds, per message, the lengths of Call-ID, top Via branch and From tag, the
// CSeq number and the length of the CSeq method — the same as the C harness.
import SIPMessage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func fail(_ s: String) -> Never {
    let text = "SwitchboardBench: \(s)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

var seconds = 3.0
var files: [String] = []
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    if a == "--seconds" {
        guard let v = args.popFirst(), let d = Double(v) else { fail("--seconds needs a number") }
        seconds = d
    } else if a == "--parser" {
        _ = args.popFirst()
    } else {
        files.append(a)
    }
}
guard !files.isEmpty else { fail("usage: SwitchboardBench --seconds S FILE...") }

func readFile(_ path: String) -> [UInt8] {
    guard let f = fopen(path, "rb") else { fail("cannot open \(path)") }
    defer { fclose(f) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, f)
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

let inputs = files.map(readFile)

@inline(never)
func work(_ bytes: [UInt8]) -> UInt64 {
    guard let m = try? SIPMessage(bytes: bytes) else { fail("parse failed") }
    guard let id = m.callIDBytes, let branch = m.topViaBranchBytes, let tag = m.fromTagBytes,
          let cs = try? m.cseq() else { fail("missing field") }
    return UInt64(id.count + branch.count + tag.count) + UInt64(cs.sequence) + UInt64(cs.method.token.utf8.count)
}

var cycle: UInt64 = 0
for i in inputs { cycle &+= work(i) }

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

// Warm up.
for _ in 0..<2000 { for i in inputs { _ = work(i) } }

// Allocations, when the malloc-count interposer is preloaded.
typealias CountFn = @convention(c) () -> UInt64
var allocsPerMessage: Double? = nil
if let sym = dlsym(dlopen(nil, RTLD_NOW), "sb_malloc_count") {
    let count = unsafeBitCast(sym, to: CountFn.self)
    let n = 100_000
    var sink: UInt64 = 0
    let before = count()
    for k in 0..<n { sink &+= work(inputs[k % inputs.count]) }
    let after = count()
    allocsPerMessage = Double(after - before) / Double(n)
    if sink == 0 { fail("no work") }
}

var checksum: UInt64 = 0
var messages = 0
let start = now()
var elapsed = 0.0
while elapsed < seconds {
    for _ in 0..<100 {
        for i in inputs { checksum &+= work(i) }
    }
    messages += 100 * inputs.count
    elapsed = now() - start
}
var line = "switchboard msgs_per_sec=\(Double(messages) / elapsed) messages=\(messages) checksum=\(checksum) cycle_checksum=\(cycle)"
if let a = allocsPerMessage { line += " allocs_per_msg=\(a)" }
print(line)
