// MediaSessionBench: N concurrent calls (2N MediaSessions on 127.0.0.1, each side encoding,
// sending, receiving and decoding every 20 ms) for a given time; prints the process CPU time per
// call, the p99 and worst tick lateness over all sessions, and the packets carried and lost.
// Run through scripts/bench-media-session (release build).
import Glibc
import Media
import MediaRuntime
import SDP

func argument(_ name: String, _ fallback: String) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    return fallback
}

let calls = Int(argument("--calls", "10")) ?? 10
let seconds = Double(argument("--seconds", "10")) ?? 10
let codecName = argument("--codec", "opus")
let srtp = SRTPPolicy(rawValue: argument("--srtp", "mandatory")) ?? .mandatory
let codec: Codec = codecName == "pcmu" ? .pcmu : (codecName == "pcma" ? .pcma : .opus)

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

let complexity = Int(argument("--complexity", ""))
let config = MediaSessionConfiguration(portRange: 30000...39999, codecs: [codec, .telephoneEvent], srtpPolicy: srtp,
                                       opusComplexity: complexity)
var sessions: [MediaSession] = []
do {
    for i in 0..<calls {
        let a = try MediaSession(configuration: config, input: .tone(frequency: 440 + Double(i % 50)))
        let b = try MediaSession(configuration: config, input: .tone(frequency: 1000))
        var oaA = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [a.streamCapabilities()]), sessionID: 1)
        var oaB = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [b.streamCapabilities()]), sessionID: 2)
        let answer = try oaB.receiveOffer(oaA.makeOffer())
        guard let na = try oaA.receiveAnswer(answer.sdp).audio, let nb = answer.negotiated.audio else { fatalError("no audio negotiated") }
        try b.apply(nb)
        try a.apply(na)
        sessions += [a, b]
    }
} catch {
    print("error: \(error)")
    exit(1)
}
let cpuStart = cpuSeconds()
let wallStart = ContinuousClock.now
usleep(UInt32(seconds * 1_000_000))
let cpu = cpuSeconds() - cpuStart
let wall = ContinuousClock.now - wallStart
let stats = sessions.map { $0.stats() }
sessions.forEach { $0.stop() }
func ms(_ d: Duration) -> Double { Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }
let p99s = stats.compactMap { $0.sendLatenessP99 }.map(ms).sorted()
let worstP99 = p99s.last ?? 0
let medianP99 = p99s.isEmpty ? 0 : p99s[p99s.count / 2]
let maxLate = stats.map { ms($0.sendLatenessMax) }.max() ?? 0
let sent = stats.reduce(0) { $0 + $1.call.sent.packets }
let received = stats.reduce(0) { $0 + $1.call.received.packets }
let lost = stats.reduce(0) { $0 + $1.call.packetsLost }
let wallSeconds = ms(wall) / 1000
func f(_ x: Double, _ digits: Int) -> String {
    let scale = Double([1, 10, 100, 1000][min(3, digits)])
    return String((x * scale).rounded() / scale)
}
let perCall = cpu / wallSeconds * 100 / Double(calls)
let total = cpu / wallSeconds * 100
var line = "calls=\(calls) codec=\(codecName) complexity=\(complexity.map(String.init) ?? "default") srtp=\(srtp.rawValue) seconds=\(f(wallSeconds, 1))"
line += " cpu_percent_per_call=\(f(perCall, 3)) cpu_percent_total=\(f(total, 1))"
line += " p99_lateness_ms_median_session=\(f(medianP99, 1)) p99_lateness_ms_worst_session=\(f(worstP99, 1))"
line += " max_lateness_ms=\(f(maxLate, 1)) packets_sent=\(sent) packets_received=\(received) lost=\(lost)"
print(line)
