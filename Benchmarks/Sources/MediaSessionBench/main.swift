// MediaSessionBench: N concurrent calls carried by Switchboard MediaSessions on the shared media
// engine, each talking to a cheap far end for a given time. Every session encodes, protects and
// sends one frame per 20 ms and receives, unprotects, jitter-buffers and decodes the far end's
// (or, with --echo, decodes what arrives and sends it back re-encoded). The far end is one
// thread of this process with one socket standing in for remote phones, kept cheap because it
// shares the cores: it replays frames encoded once and SRTP-protected before the run, spread
// over the 20 ms period as independent phones would be, sends them in sendmmsg batches, and
// counts what comes back (every 16th packet authenticated, for SRTP). Printed: CPU of the sessions (process CPU
// minus the far end's thread), the engine's tick lateness (p99, worst) and utilization, and
// packets sent, received and lost each way.
// Options: --calls N --seconds S --codec opus|pcmu|pcma --srtp off|mandatory --complexity C --bitrate B
// --input tone|signal (what the sessions and the far end encode: a sine per call, or cmedia's
// own benchmark signal, so that the C ceiling and the sessions encode the same kind of audio)
// --echo --threads T --realtime P (SCHED_FIFO workers) --far-realtime P (SCHED_FIFO far end, so
// that the stand-in for remote phones is served first and never limits what is measured)
// --phases K (the engine's phase slots per period, default 40) --share-late-ticks 0|1 (whether a
// worker runs another's ticks that are over 1 ms late; default 1, as the engine).
// Run through scripts/bench-media-session (release build).
import CSocket
import Glibc
import Media
import MediaCodecs
import MediaRuntime
import RTP
import SDP
import SRTP
import Synchronization

func argument(_ name: String, _ fallback: String) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    return fallback
}

let calls = Int(argument("--calls", "10")) ?? 10
let seconds = Double(argument("--seconds", "10")) ?? 10
let codecName = argument("--codec", "opus")
let srtpPolicy = SRTPPolicy(rawValue: argument("--srtp", "mandatory")) ?? .mandatory
let codec: Codec = codecName == "pcmu" ? .pcmu : (codecName == "pcma" ? .pcma : .opus)
let complexity = Int(argument("--complexity", ""))
let bitrate = Int(argument("--bitrate", ""))
let inputKind = argument("--input", "tone")
guard inputKind == "tone" || inputKind == "signal" else { die("--input takes tone or signal") }

let echo = CommandLine.arguments.contains("--echo")
let threads = Int(argument("--threads", "")) ?? MediaEngine.onlineProcessors

func die(_ message: String) -> Never {
    print("error: \(message)")
    exit(1)
}

func cpuSeconds(_ who: Int32) -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(who), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func nowNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

// Two sockets per session and the far end's: raise the descriptor limit to the hard one.
let descriptors = MediaEngine.raiseDescriptorLimit()
guard descriptors > calls * 2 + 64 else { die("the descriptor limit \(descriptors) is too low for \(calls) calls") }

// The far end's socket.
var farAddress = sockaddr_storage()
var farLength = socklen_t(0)
_ = cs_sockaddr_from_text("127.0.0.1", 0, &farAddress, &farLength)
let farSocket = cs_socket(AF_INET, CS_KIND_UDP, 1)
guard farSocket >= 0, cs_bind(farSocket, &farAddress, farLength) == 0 else { die("far end socket") }
_ = cs_set_buffer_size(farSocket, 0, 8 * 1024 * 1024)
_ = cs_set_buffer_size(farSocket, 1, 8 * 1024 * 1024)
_ = cs_getsockname(farSocket, &farAddress, &farLength)
var farPort: UInt16 = 0
var scope: UInt32 = 0
var raw = [UInt8](repeating: 0, count: 16)
_ = cs_sockaddr_parts(&farAddress, farLength, &raw, &farPort, &scope)

// The far end's frames: one second of a 1 kHz tone, encoded once.
let frames: [[UInt8]] = {
    let rate = codec.name == "opus" ? 48000 : 8000
    var source: any AudioSource = inputKind == "signal"
        ? SyntheticSignal(sampleRate: rate) : ToneGenerator(frequency: 1000, amplitude: 0.3, sampleRate: rate)
    do {
        if codec.name == "opus" {
            let encoder = try OpusEncoder(OpusEncoder.Configuration(sampleRate: 48000, channels: 1, application: .voip))
            return try (0..<50).map { _ in try encoder.encode(source.nextFrame(count: 960) ?? []) }
        }
        var encoder = try G711Encoder(law: codec.name == "pcma" ? .aLaw : .muLaw, frameMilliseconds: 20)
        return try (0..<50).map { _ in try encoder.encode(source.nextFrame(count: 160) ?? []) }
    } catch {
        die("encoding the far end's frames: \(error)")
    }
}()

/// One call's far end: where to send, its SRTP, its RTP header state, what it received.
final class FarEnd: @unchecked Sendable {
    let destination: (sockaddr_storage, socklen_t)
    let srtp: SRTPContext?
    let ssrc = UInt32.random(in: .min ... .max)
    let payloadType: UInt8
    var sequence = UInt16.random(in: .min ... .max)
    var timestamp = UInt32.random(in: .min ... .max)
    var sent: UInt64 = 0
    var received: UInt64 = 0
    var rejected: UInt64 = 0
    var frame = 0
    /// The packets to send, protected before the run (a far end stands in for remote phones,
    /// whose CPU is not ours to spend); when they run out, packets are made as they go.
    /// (Each in its own buffer, allocated once and never freed: the far end's sends copy nothing.)
    var prepared: [(pointer: UnsafeMutablePointer<UInt8>, count: Int)] = []
    /// Received packets so far: every 16th is authenticated (SRTP unprotect), the rest counted.
    var seen = 0

    init(port: UInt16, srtp: SRTPContext?, payloadType: UInt8) {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        _ = cs_sockaddr_from_text("127.0.0.1", port, &storage, &length)
        destination = (storage, length)
        self.srtp = srtp
        self.payloadType = payloadType
    }
}

let realtimePriority = Int32(argument("--realtime", ""))
let farPriority = Int32(argument("--far-realtime", ""))
let phases = Int(argument("--phases", "40")) ?? 40
let sharing = argument("--share-late-ticks", "1") != "0"
let engine = MediaEngine(threads: threads, phases: phases, scheduling: realtimePriority.map { .realtime(priority: $0) } ?? .normal,
                         sharesLateTicks: sharing)
let config = MediaSessionConfiguration(
    portRange: 30000...45999, codecs: [codec, .telephoneEvent], rtcpMux: true, srtpPolicy: srtpPolicy, opusComplexity: complexity, opusBitrate: bitrate,
    engine: engine)
var sessions: [MediaSession] = []
var farEnds: [FarEnd] = []
var farEndByPort: [UInt16: Int] = [:]
do {
    for i in 0..<calls {
        let input: MediaAudioInput = echo ? .echo
            : inputKind == "signal" ? .source(SyntheticSignal(sampleRate: codec.name == "opus" ? 48000 : 8000, offset: UInt64(i) * 48000))
            : .tone(frequency: 440 + Double(i % 50))
        let session = try MediaSession(configuration: config, input: input)
        let key = SRTPMasterKey.random(for: .aesCM128HMACSHA1_80)
        let farKeys = srtpPolicy == .off ? [] : [SRTPKey(suite: SRTPProfile.aesCM128HMACSHA1_80.suite, keySaltBytes: key.key + key.salt)]
        let farStream = StreamCapabilities(
            mediaType: .audio, port: farPort, codecs: [codec, .telephoneEvent], ptime: 20, rtcpMux: true,
            srtp: SRTPCapabilities(policy: srtpPolicy, keys: farKeys))
        var far = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [farStream]), sessionID: 1)
        var near = OfferAnswer(capabilities: MediaCapabilities(address: "127.0.0.1", streams: [session.streamCapabilities()]), sessionID: 2)
        let answer = try near.receiveOffer(far.makeOffer())
        guard let farMedia = try far.receiveAnswer(answer.sdp).audio, let nearMedia = answer.negotiated.audio else { die("no audio negotiated") }
        var context: SRTPContext?
        if let s = farMedia.srtp {
            context = try SRTPContext(
                local: CryptoAttribute(tag: s.tag, suite: s.suite, keyParameters: s.localKeys),
                remote: CryptoAttribute(tag: s.tag, suite: s.suite, keyParameters: s.remoteKeys))
        }
        try session.apply(nearMedia)
        sessions.append(session)
        farEndByPort[session.localPort] = farEnds.count
        farEnds.append(FarEnd(port: session.localPort, srtp: context, payloadType: farMedia.sendCodec.payloadType))
    }
} catch {
    die("\(error)")
}

/// The far end's thread: sends each call's next frame at its own phase of the 20 ms period and
/// reads what comes back between sends.
final class FarEndThread: @unchecked Sendable {
    let ends: [FarEnd]
    /// The call of each local port (index + 1; 0: none): one load per received packet.
    var byPort = [Int32](repeating: 0, count: 65536)
    let stop = Atomic<Bool>(false)
    var cpu: Double = 0
    var realtime = false
    /// Packets a send batch did not take (the rest of a batch after an error), the last errno,
    /// and calls whose schedule was restarted after falling 200 ms behind.
    var unsent: UInt64 = 0
    var sendErrno: Int32 = 0
    var restarts: UInt64 = 0
    // A sendmmsg batch being gathered (reused: nothing is allocated per packet).
    var pendingPointers: [UnsafePointer<UInt8>?] = []
    var pendingLengths: [Int] = []
    var pendingAddresses: [sockaddr_storage] = []
    var pendingAddressLengths: [socklen_t] = []
    var pendingEnds: [FarEnd] = []

    init(ends: [FarEnd], byPort: [UInt16: Int]) {
        self.ends = ends
        for (port, index) in byPort { self.byPort[Int(port)] = Int32(index + 1) }
        pendingPointers.reserveCapacity(64)
        pendingLengths.reserveCapacity(64)
        pendingAddresses.reserveCapacity(64)
        pendingAddressLengths.reserveCapacity(64)
        pendingEnds.reserveCapacity(64)
    }

    func run() {
        // Real-time only when asked (--far-realtime), and never together with real-time
        // workers: real-time threads together may use 95% of each core per second
        // (sched_rt_runtime_us), and both real-time got the workers throttled for tens of ms.
        if let farPriority { realtime = cs_set_thread_realtime(farPriority) == 0 }
        let period: Int64 = 20_000_000
        let count = max(1, ends.count)
        var next = [Int64](repeating: 0, count: ends.count)
        let start = nowNanoseconds() + 5_000_000
        for i in ends.indices { next[i] = start + period * Int64(i) / Int64(count) }
        let slot = 2048, batch = 64
        var buffer = [UInt8](repeating: 0, count: slot * batch)
        var addresses = [sockaddr_storage](repeating: sockaddr_storage(), count: batch)
        var lengths = [socklen_t](repeating: 0, count: batch)
        var sizes = [Int](repeating: 0, count: batch)
        var cursor = 0
        while !stop.load(ordering: .relaxed) {
            // Send what is due (calls' phases are in index order, so a cursor walks them).
            // Due packets leave in sendmmsg batches of up to 64 (one socket, many destinations).
            var now = nowNanoseconds()
            var sentThisRound = 0
            while next[cursor] <= now && sentThisRound < count {
                if let packet = packet(for: ends[cursor]) { queue(packet, ends[cursor]) }
                if pendingEnds.count == 64 { flush() }
                next[cursor] += period
                if now - next[cursor] > 200_000_000 {
                    next[cursor] = now + period
                    restarts += 1
                }
                cursor = (cursor + 1) % count
                sentThisRound += 1
            }
            flush()
            // Receive until the next send is due.
            while true {
                for i in 0..<batch { lengths[i] = socklen_t(MemoryLayout<sockaddr_storage>.size) }
                let n = buffer.withUnsafeMutableBufferPointer { b in
                    cs_recv_batch(farSocket, b.baseAddress, slot, Int32(batch), &addresses, &lengths, &sizes, nil, Int32(MSG_DONTWAIT))
                }
                guard n > 0 else { break }
                buffer.withUnsafeBytes { b in
                    for i in 0..<Int(n) {
                        receive(UnsafeRawBufferPointer(rebasing: b[(i * slot)..<(i * slot + min(sizes[i], slot))]), from: addresses[i], length: lengths[i])
                    }
                }
            }
            // Sleep until the next send is due, but at least 250 µs: with thousands of calls a
            // send is due every few µs, and a wake-up each would cost more than the packets (a
            // real-time thread gets no timer slack: it spun a whole core that way). Phones' own
            // send times vary by more than that. Not in poll(): a waiter on the socket would
            // make every packet the sessions send wake this thread.
            now = nowNanoseconds()
            let wait = next[cursor] - now
            if wait > 0 {
                var timeout = timespec(tv_sec: 0, tv_nsec: Int(min(max(wait, 250_000), 20_000_000)))
                _ = nanosleep(&timeout, nil)
            }
        }
        cpu = cpuSeconds(1)  // RUSAGE_THREAD
    }

    func packet(for end: FarEnd) -> (pointer: UnsafeMutablePointer<UInt8>, count: Int)? {
        if end.frame < end.prepared.count {
            defer { end.frame += 1 }
            return end.prepared[end.frame]
        }
        // Past the prepared ones (a run longer than planned): made now, kept like them.
        guard let bytes = makePacket(for: end) else { return nil }
        let p = Self.keep(bytes)
        end.prepared.append(p)
        end.frame = end.prepared.count
        return p
    }

    /// A packet copied into a buffer of its own that lives as long as the process.
    static func keep(_ bytes: [UInt8]) -> (pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        let b = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, bytes.count))
        b.initialize(from: bytes, count: bytes.count)
        return (b, bytes.count)
    }

    func makePacket(for end: FarEnd) -> [UInt8]? {
        let payload = frames[end.frame % frames.count]
        end.frame += 1
        let packet = RTPPacket(payloadType: end.payloadType, sequenceNumber: end.sequence, timestamp: end.timestamp, ssrc: end.ssrc, payload: payload[...])
        end.sequence &+= 1
        end.timestamp &+= codec.name == "opus" ? 960 : 160
        guard var bytes = packet.serialized() else { return nil }
        if let srtp = end.srtp {
            do throws(SRTPError) { try srtp.protectRTP(&bytes) } catch { return nil }
        }
        return bytes
    }

    func queue(_ packet: (pointer: UnsafeMutablePointer<UInt8>, count: Int), _ end: FarEnd) {
        pendingPointers.append(UnsafePointer(packet.pointer))
        pendingLengths.append(packet.count)
        pendingAddresses.append(end.destination.0)
        pendingAddressLengths.append(end.destination.1)
        pendingEnds.append(end)
    }

    func flush() {
        guard !pendingEnds.isEmpty else { return }
        let sent = cs_send_batch(farSocket, &pendingPointers, &pendingLengths, Int32(pendingEnds.count), &pendingAddresses, &pendingAddressLengths, 0)
        for i in 0..<max(0, Int(sent)) { pendingEnds[i].sent += 1 }
        if Int(sent) < pendingEnds.count {
            unsent += UInt64(pendingEnds.count - max(0, Int(sent)))
            sendErrno = cs_errno()
        }
        pendingPointers.removeAll(keepingCapacity: true)
        pendingLengths.removeAll(keepingCapacity: true)
        pendingAddresses.removeAll(keepingCapacity: true)
        pendingAddressLengths.removeAll(keepingCapacity: true)
        pendingEnds.removeAll(keepingCapacity: true)
    }

    func receive(_ datagram: UnsafeRawBufferPointer, from storage: sockaddr_storage, length: socklen_t) {
        // IPv4 on loopback: the source port is bytes 2-3 of the sockaddr_in, network order.
        guard Int32(storage.ss_family) == AF_INET else { return }
        let port = withUnsafeBytes(of: storage) { Int($0[2]) << 8 | Int($0[3]) }
        let slot = byPort[port]
        guard slot > 0 else { return }
        let end = ends[Int(slot) - 1]
        // Only RTP counts (RTCP shares the port: rtcp-mux).
        guard RTPDemultiplexer.classify(datagram) == .rtp else { return }
        end.seen += 1
        if let srtp = end.srtp, end.seen % 16 == 1 {
            var bytes = Array(datagram)
            do throws(SRTPError) { try srtp.unprotectRTP(&bytes) } catch {
                end.rejected += 1
                return
            }
        }
        end.received += 1
    }
}

let farThread = FarEndThread(ends: farEnds, byPort: farEndByPort)
// Every packet of the run (warm-up, measured window and a margin), made and protected now.
let packetsPerCall = Int((seconds + 3) * 50)
for end in farEnds {
    end.prepared.reserveCapacity(packetsPerCall)
    for _ in 0..<packetsPerCall { if let p = farThread.makePacket(for: end) { end.prepared.append(FarEndThread.keep(p)) } }
    end.frame = 0
}
final class Box: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a joinable thread (outside the main actor: the body runs on its own thread).
nonisolated func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    var tid = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    guard pthread_create(&tid, nil, { arg in
        Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
        return nil
    }, box) == 0 else { die("pthread_create") }
    return tid
}

let tid = startThread { farThread.run() }

// Warm-up (jitter buffers fill, SRTP contexts see their first packets), then the measured window.
usleep(1_000_000)
let engineStart = engine.statistics()
let sentStart = farEnds.map(\.sent), receivedStart = farEnds.map(\.received)
let sessionStart = sessions.map { $0.stats() }
let cpuStart = cpuSeconds(RUSAGE_SELF.rawValue)
let wallStart = nowNanoseconds()
usleep(UInt32(seconds * 1_000_000))
let cpuEnd = cpuSeconds(RUSAGE_SELF.rawValue)
let wallEnd = nowNanoseconds()
let engineEnd = engine.statistics()
let sessionEnd = sessions.map { $0.stats() }
farThread.stop.store(true, ordering: .sequentiallyConsistent)
pthread_join(tid, nil)
let sentWindow = zip(farEnds.map(\.sent), sentStart).reduce(0) { $0 + $1.0 - $1.1 }
let receivedWindow = zip(farEnds.map(\.received), receivedStart).reduce(0) { $0 + $1.0 - $1.1 }
let rejected = farEnds.reduce(0) { $0 + $1.rejected }
sessions.forEach { $0.stop() }
engine.shutdown()

let wallSeconds = Double(wallEnd - wallStart) / 1e9
// The far end's thread CPU covers its whole life (warm-up included): scale it to the window.
let farShare = farThread.cpu * wallSeconds / (wallSeconds + 1)
let sessionsCPU = max(0, cpuEnd - cpuStart - farShare)
var window = engineEnd
window.ticks -= engineStart.ticks
window.datagrams -= engineStart.datagrams
for i in window.latenessHistogram.indices { window.latenessHistogram[i] -= engineStart.latenessHistogram[i] }
window.busy -= engineStart.busy
window.elapsed -= engineStart.elapsed
func ms(_ d: Duration?) -> Double { guard let d else { return 0 }; return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }
func f(_ x: Double, _ digits: Int) -> String {
    let scale = Double([1, 10, 100, 1000][min(3, digits)])
    return String((x * scale).rounded() / scale)
}
let nearSent = zip(sessionEnd, sessionStart).reduce(UInt64(0)) { $0 + $1.0.call.sent.packets - $1.1.call.sent.packets }
let nearReceived = zip(sessionEnd, sessionStart).reduce(UInt64(0)) { $0 + $1.0.call.received.packets - $1.1.call.received.packets }
let expected = Double(calls) * wallSeconds * 50
// Loss toward us from the sessions' own sequence-number gaps (RFC 3550 cumulative loss): the
// far end's sent count minus what arrived also counts packets still queued when the window
// closes, which at thousands of streams is itself a percent.
let nearLost = zip(sessionEnd, sessionStart).reduce(Int64(0)) { $0 + $1.0.call.packetsLost - $1.1.call.packetsLost }
let lossToUs = Double(max(0, nearLost)) / max(1, Double(nearReceived) + Double(max(0, nearLost)))
let undelivered = max(0, 1 - Double(nearReceived) / max(1, Double(sentWindow)))
let lossFromUs = max(0, 1 - Double(receivedWindow) / max(1, Double(nearSent)))
let shortfall = max(0, 1 - Double(nearSent) / max(1, expected))
var line = "calls=\(calls) codec=\(codecName) complexity=\(complexity.map(String.init) ?? "default") bitrate=\(bitrate.map(String.init) ?? "auto") input=\(inputKind) srtp=\(srtpPolicy.rawValue) srtp_crypto=\(SRTPCrypto.current.rawValue) echo=\(echo)"
line += " threads=\(threads) shares_late_ticks=\(sharing) helped_ticks=\(engineEnd.helpedTicks - engineStart.helpedTicks) realtime_threads=\(engineEnd.realtimeThreads) far_end_realtime=\(farThread.realtime) seconds=\(f(wallSeconds, 1))"
line += " sessions_cpu_percent=\(f(sessionsCPU / wallSeconds * 100, 1)) cpu_percent_per_call=\(f(sessionsCPU / wallSeconds * 100 / Double(calls), 3))"
line += " far_end_cpu_percent=\(f(farShare / wallSeconds * 100, 1)) engine_busy_percent=\(f(window.utilization * 100, 1))"
line += " p99_lateness_ms=\(f(ms(window.latenessQuantile(0.99)), 2)) p999_lateness_ms=\(f(ms(window.latenessQuantile(0.999)), 2))"
line += " max_lateness_ms=\(f(ms(engineEnd.maxLateness), 1))"
line += " sent_by_us=\(nearSent) send_shortfall_percent=\(f(shortfall * 100, 2)) received_by_us=\(nearReceived) loss_to_us_percent=\(f(lossToUs * 100, 2))"
line += " not_yet_received_percent=\(f(undelivered * 100, 2))"
// When the far end (on the same cores) cannot send every frame, the sessions were not fully loaded.
line += " far_end_unsent=\(farThread.unsent) far_end_send_errno=\(farThread.sendErrno) far_end_restarts=\(farThread.restarts)"
line += " far_end_shortfall_percent=\(f(max(0, 1 - Double(sentWindow) / max(1, expected)) * 100, 2))"
line += " received_by_far_end=\(receivedWindow) loss_from_us_percent=\(f(lossFromUs * 100, 2)) srtp_rejected=\(rejected)"
print(line)
if CommandLine.arguments.contains("--histogram") {
    let buckets = window.latenessHistogram.enumerated().filter { $0.element > 0 }.map { "\(Double($0.offset) / 10)ms:\($0.element)" }
    print("lateness histogram (lower bounds): " + buckets.joined(separator: " "))
    print("engine window: \(window)")
}
