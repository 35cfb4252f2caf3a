import Foundation
import PacketCapture
import Media
import SwitchboardTestSupport
import Testing

@testable import CaptureAnalysis
@testable import SwitchboardTools

/// A network namespace of its own (so the host's `lo` and the tests running beside this one are
/// untouched) whose `lo` loses about 5% of the UDP datagrams sent on it. The kernel here has no
/// `sch_netem`, so the loss is an nftables rule on `lo`'s egress hook (`numgen random mod 100 < 5
/// drop`) for datagrams to the media ports: it runs before the capture tap, so the capture lacks
/// the lost packets as it would on a lossy link. Unlike netem's silent loss, a sender whose socket
/// sets IP_RECVERR (ours do) gets ENOBUFS from that `sendto`. Deleted by ``delete()`` whatever
/// happened.
struct LossyNamespace {
    static let ip = "/usr/sbin/ip"
    static let nft = "/usr/sbin/nft"
    static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: ip) && FileManager.default.isExecutableFile(atPath: nft)
    }

    let name = "sb-netem-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// Creates the namespace, brings its `lo` up and adds the loss.
    func create(lossPercent: Int) async throws {
        try await run([Self.ip, "netns", "add", name])
        try await exec([Self.ip, "link", "set", "lo", "up"])
        try await exec([Self.nft, "add", "table", "netdev", "sbloss"])
        try await exec([Self.nft, "add", "chain", "netdev", "sbloss", "out", "{ type filter hook egress device lo priority 0; }"])
        // Only media ports lose (RTP and RTCP, 20000-59999; SIP on 5060-5099 is spared: see the suite).
        try await exec([Self.nft, "add", "rule", "netdev", "sbloss", "out", "meta", "l4proto", "udp", "udp", "dport", "20000-59999",
                        "numgen", "random", "mod", "100", "<", String(lossPercent), "drop"])
    }

    /// `ip netns exec NAME` + `command`.
    func command(_ command: [String]) -> [String] { ["netns", "exec", name] + command }

    func exec(_ command: [String]) async throws { try await run([Self.ip] + self.command(command)) }

    private func run(_ argv: [String]) async throws {
        let r = await ExternalTool.run(argv[0], Array(argv.dropFirst()), timeout: 10, mergeErrors: true)
        guard r.ok else { throw ToolError("\(argv.joined(separator: " ")): \(r.output)") }
    }

    /// Kills what still runs in it and deletes it (blocking: for `defer`).
    func delete() {
        let pids = ExternalTool.runBlocking(Self.ip, ["netns", "pids", name], timeout: 5, mergeErrors: false).output
        for p in pids.split(separator: "\n").compactMap({ Int32($0) }) { kill(p, SIGKILL) }
        _ = ExternalTool.runBlocking(Self.ip, ["netns", "delete", name], timeout: 5, mergeErrors: false)
    }
}

/// Calls between baresip or linphonec and our phone (`switchboard answer`, run as a program inside the
/// namespace) with about 5% of the datagrams lost, recorded there by tshark (dumpcap) on `lo`,
/// plain RTP and SDES-SRTP: `capture --rtp` (its JSON too) agrees with `tshark -z rtp,streams`
/// on the same file, both directions show loss, and the SRTP streams, decrypted with the keys of
/// the capture's own SDP, give tshark's packet and loss figures (read from the clear headers).
/// SIP is not made lossy: with it, 3 calls of about 17 stayed "connecting" on our side, its
/// 200 never on the wire and never retransmitted (the dropped first send fails with ENOBUFS, see
/// ``LossyNamespace``, and the transaction ends on that transport error): an artefact of the
/// emulated loss, not what these media statistics are about.
@Suite("Captures of baresip and linphonec calls with loss", .serialized,
       .enabled(if: (LossyNamespace.available && Baresip.available && Linphone.available && Tshark.available) || TestPaths.isCI,
                "root, ip, nft, baresip, linphonec or tshark missing: lossy captures skipped"),
       .requires("root, ip (iproute2), nft (nftables), baresip, linphonec and tshark",
                 { LossyNamespace.available && Baresip.available && Linphone.available && Tshark.available }))
struct LossyCaptureTests {
    /// The `switchboard` program built beside the test bundle.
    static var switchboard: String? {
        let dir = Bundle.main.executableURL?.deletingLastPathComponent().path ?? ""
        return ExternalTool.find([dir + "/switchboard", TestPaths.repoRoot + "/.build/debug/switchboard"])
    }

    /// The peer that calls our phone.
    enum Peer { case baresip, linphonec }

    /// Records a call in a fresh lossy namespace: our phone answers on 127.0.0.1:5090 and hangs
    /// up after 6 s; baresip (PCMU, ausine) or linphonec (its first codec, opus; a 1 kHz WAV
    /// played once its streams run: without a sound card it sends next to nothing else) dials it.
    static func record(to file: String, srtp: Bool, peer: Peer = .baresip) async throws -> String {
        let bin = try #require(Self.switchboard, "the switchboard program is not built")
        let ns = LossyNamespace()
        defer { ns.delete() }
        try await ns.create(lossPercent: 5)

        let tshark = Process()
        tshark.executableURL = URL(fileURLWithPath: LossyNamespace.ip)
        tshark.arguments = ns.command([Tshark.path!, "-i", "lo", "-f", "udp", "-B", "16", "-a", "duration:30", "-w", file, "-q"])
        tshark.standardOutput = FileHandle.nullDevice
        tshark.standardError = FileHandle.nullDevice
        try tshark.run()
        defer { if tshark.isRunning { kill(tshark.processIdentifier, SIGKILL) } }
        for _ in 0..<100 where ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0) == 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        try await Task.sleep(for: .milliseconds(300))

        async let answer = ExternalTool.run(LossyNamespace.ip, ns.command([bin, "answer", "--listen", "udp:127.0.0.1:5090", "--ring", "100",
                                                                          "--hangup-after", "6", "--count", "1", "--duration", "20",
                                                                          "--srtp", srtp ? "mandatory" : "off", "--rtp-ports", "30000-30099",
                                                                          "--tone", "1000"]),
                                            timeout: 25, mergeErrors: true)
        let rundir = NSTemporaryDirectory() + "sb-\(peer)-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: rundir) }
        var peerLog: () -> String = { Baresip.log(rundir) }
        switch peer {
        case .baresip:
            let options = "answermode=auto;audio_codecs=pcmu" + (srtp ? ";mediaenc=srtp-mand" : "")
            try await ns.exec([TestPaths.repoRoot + "/scripts/peers/baresip-start", "5070", "5072", rundir, options])
            try await Task.sleep(for: .milliseconds(300))  // our phone listens by now
            try await ns.exec([TestPaths.repoRoot + "/scripts/peers/baresip-ctl", "5072", "dial sip:switchboard@127.0.0.1:5090", "--wait", "0.5"])
        case .linphonec:
            // Its background processes keep the start script's stderr: run it with files, not pipes.
            try await Baresip.run(LossyNamespace.ip, ns.command([TestPaths.repoRoot + "/scripts/peers/linphone-start", "5070", rundir, "auto"]
                                                                + (srtp ? ["srtp"] : [])), timeout: .seconds(30))
            let l = Linphone.Instance(pid: 0, sipPort: 5070, rundir: rundir)
            peerLog = { Linphone.events(l) }
            let wav = rundir + "/tone.wav"
            let samples = (0..<128_000).map { Int16(8000 * sin(2 * Double.pi * 1000 * Double($0) / 16000)) }
            try WAVFile(sampleRate: 16000, samples: .pcm16(samples)).write(path: wav)
            try Linphone.send(l, "soundcard use files")
            try await Task.sleep(for: .milliseconds(300))  // our phone listens by now
            try Linphone.send(l, "call sip:switchboard@127.0.0.1:5090")
            #expect(await Linphone.waitFor(l, "Media streams established"), "\(Linphone.events(l))")
            try Linphone.send(l, "play \(wav)")
        }
        let phone = await answer
        try await Task.sleep(for: .milliseconds(300))
        kill(tshark.processIdentifier, SIGINT)
        for _ in 0..<100 where tshark.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        return phone.output + "\n" + peerLog()
    }

    @Test("plain RTP: every figure agrees with tshark, loss seen both ways", .timeLimit(.minutes(1)), arguments: [Peer.baresip, .linphonec])
    func plain(_ peer: Peer) async throws {
        let dir = NSTemporaryDirectory() + "sb-lossy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/call.pcapng"
        let log = try await Self.record(to: file, srtp: false, peer: peer)
        let report = try await CaptureRTPTests.compare(file)
        let streams = try #require(report.analysis.rtp?.streams, "\(log)")
        #expect(streams.count == 2, "\(log)")
        for s in streams {
            // 6 s of 20 ms packets, about 5% of them lost.
            #expect(s.packets > 200 && s.lost > 0 && s.lost < s.packets / 5, "\(s.key): \(s.packets) packets, \(s.lost) lost\n\(log)")
        }
        // The JSON view carries the same figures.
        let json = CaptureCommand.run(path: file, view: .rtp).json
        for s in streams {
            #expect(json.contains("\"lost\":\(s.lost)") || json.contains("\"lost\": \(s.lost)"), "\(json.prefix(3000))")
        }
    }

    @Test("SDES-SRTP: decrypted with the SDP's keys, packets and loss as tshark reads them from the headers", .timeLimit(.minutes(1)),
          arguments: [Peer.baresip, .linphonec])
    func srtp(_ peer: Peer) async throws {
        let dir = NSTemporaryDirectory() + "sb-lossy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/call.pcapng"
        let log = try await Self.record(to: file, srtp: true, peer: peer)
        let report = CaptureCommand.run(path: file, view: .rtp)
        #expect(report.error == nil)
        let streams = try #require(report.analysis.rtp?.streams, "\(log)")
        #expect(streams.count == 2, "\(streams.map(\.key))\n\(log)")
        let theirs = try await CaptureRTPTests.tsharkStreams(file)
        for s in streams {
            let t = theirs.first { $0.key == "\(s.key.source)->\(s.key.destination) \(RTPAudioExportName.hex(s.key.ssrc))" }
            #expect(t?.packets == s.packets && t?.lost == s.lost, "tshark \(String(describing: t)) ours \(s.packets) \(s.lost)")
            #expect(s.srtp?.keySource == .sdp && s.srtp?.decrypted == s.packets && s.srtpFailures == 0, "\(String(describing: s.srtp))")
            #expect(s.packets > 200 && s.lost > 0 && s.lost < s.packets / 5, "\(s.key): \(s.packets) packets, \(s.lost) lost\n\(log)")
            if let t {
                // Header-only figures need no decryption: they agree as in the plain case.
                #expect(abs((s.maxDelta ?? 0) - t.deltas[2]) < 0.0015 && abs((s.maxJitter ?? 0) - t.jitters[2]) < 0.0015,
                        "tshark \(t) ours \(s.maxDelta ?? -1) \(s.maxJitter ?? -1)")
            }
        }
    }
}
