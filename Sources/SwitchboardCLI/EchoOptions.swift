import ArgumentParser
import SIPRuntime
import SIPLoad
import MediaRuntime
import SDP
import SwitchboardTools

/// `serve --echo` and the options only it takes: the echo test line's media, limits and engine.
struct EchoOptions: ParsableArguments {
    @Flag(name: .long, help: "An echo test line: answer every INVITE's SDP offer and send back the caller's audio (dialog layer, a media session per call).")
    var echo = false

    @Option(name: .long, help: "With --echo: the media address (default: the first listen address).")
    var mediaAddress: String?

    @Option(name: .long, help: "With --echo: RTP port range, LOW-HIGH (even RTP port, RTCP on the next).")
    var rtpPorts: String = "20000-29999"

    @Option(name: .long, help: "With --echo: codecs in preference order, from opus, pcmu, pcma, g722 and telephone-event.")
    var codecs: String = "opus,pcmu,pcma,telephone-event"

    @Option(name: .long, help: "With --echo: SDES-SRTP: off, optional (RTP/AVP with a=crypto) or mandatory (RTP/SAVP).")
    var srtp: String = "optional"

    @Option(name: .long, help: "With --echo: calls up at once; more are refused.")
    var maxCalls: Int = 1000

    @Option(name: .long, help: "With --echo: the refusal over --max-calls: 503 (with Retry-After) or 486.")
    var overLimit: Int = 503

    @Option(name: .long, help: "With --echo: end a call with BYE after this many seconds without RTP (0: never).")
    var mediaTimeout: Int = 30

    @Option(name: .long, help: "With --echo: seconds between statistics lines.")
    var statsInterval: Int = 1

    @Option(name: .long, help: "With --echo: media worker threads (default: one per core).")
    var mediaThreads: Int?

    @Option(name: .long, help: "With --echo: run the media workers in SCHED_FIFO at this priority (1-99; needs CAP_SYS_NICE, else normal scheduling).")
    var realtime: Int32?

    @Option(name: .long, help: "With --echo: Opus encoder complexity 0-10 (default libopus's 10; lower carries more calls per core).")
    var opusComplexity: Int?

    @Option(name: .long, help: "With --echo: Opus target bitrate in bit/s, 6000-510000 (default: libopus's automatic, ~54 kbit/s).")
    var opusBitrate: Int?

    /// The echo server's options for a server listening on `points`.
    func options(_ points: [SIPEndpoint.ListenPoint], ringing: Bool) throws -> EchoServer.Options {
        let policy = try MediaArguments.srtpPolicy(srtp)
        let ports = try MediaArguments.portRange(rtpPorts)
        let table: [String: Codec] = ["opus": .opus, "pcmu": .pcmu, "pcma": .pcma, "g722": .g722, "telephone-event": .telephoneEvent]
        var list: [Codec] = []
        for name in codecs.split(separator: ",") {
            guard let c = table[name.lowercased()] else { throw ValidationError("--codecs: unknown codec \(name) (opus, pcmu, pcma, g722, telephone-event)") }
            list.append(c)
        }
        guard list.contains(where: { $0.name != "telephone-event" }) else { throw ValidationError("--codecs needs an audio codec") }
        guard maxCalls > 0 else { throw ValidationError("--max-calls must be positive") }
        guard overLimit == 503 || overLimit == 486 else { throw ValidationError("--over-limit takes 503 or 486") }
        let ip = mediaAddress ?? MediaArguments.address(forListenHost: points.first?.address.ipString ?? "127.0.0.1")
        if let n = mediaThreads, n < 1 { throw ValidationError("--media-threads must be positive") }
        if let p = realtime, !(1...99).contains(p) { throw ValidationError("--realtime takes a priority from 1 to 99") }
        if let c = opusComplexity, !(0...10).contains(c) { throw ValidationError("--opus-complexity takes 0 to 10") }
        if let b = opusBitrate, !(6000...510_000).contains(b) { throw ValidationError("--opus-bitrate takes 6000 to 510000 bit/s") }
        let engine = mediaThreads == nil && realtime == nil
            ? MediaEngine.shared
            : MediaEngine(threads: mediaThreads ?? MediaEngine.onlineProcessors, scheduling: realtime.map { .realtime(priority: $0) } ?? .normal)
        // Two sockets per call: the usual soft limit of 1,024 descriptors would stop at ~500 calls.
        MediaEngine.raiseDescriptorLimit()
        let media = MediaSessionConfiguration(localAddress: ip, portRange: ports, codecs: list, srtpPolicy: policy, opusComplexity: opusComplexity,
                                              opusBitrate: opusBitrate, engine: engine)
        return EchoServer.Options(media: media, maxCalls: maxCalls, overLimitCode: overLimit,
                                        mediaTimeout: mediaTimeout > 0 ? .seconds(mediaTimeout) : nil, ringing: ringing)
    }
}
