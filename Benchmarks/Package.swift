// swift-tools-version:6.0
// The benchmarks: a package of their own, so building and testing the library compiles none of
// them. It depends on the Switchboard package by path (the folder above). Run through the
// scripts/bench* commands, which build these executables in release mode.
import PackageDescription

let switchboard: (String) -> Target.Dependency = { .product(name: $0, package: "Switchboard") }

let package = Package(
    name: "SwitchboardBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Switchboard", path: ".."),
    ],
    targets: [
        // Parser throughput; run through scripts/bench.
        .executableTarget(name: "SwitchboardBench", dependencies: [switchboard("SIPMessage")]),
        // Per-step cost of a call's messages (parse, validate, header reads, the answer); run through scripts/bench-message-path.
        .executableTarget(name: "MessagePathBench", dependencies: [switchboard("SIPMessage")]),
        // Per-frame cost of the Media module; run through scripts/bench-media-engine.
        .executableTarget(name: "MediaBench", dependencies: [switchboard("Media")]),
        // Memory per established dialog (100,000 in one process); run through scripts/bench-dialogs.
        .executableTarget(name: "DialogBench", dependencies: [switchboard("SIPDialog"), switchboard("SIPMessage"),
                                                              switchboard("SIPTransaction"), switchboard("CHeapStats")]),
        // Opus+SRTP send/receive cost per frame and G.711 throughput; run through scripts/bench-media.
        .executableTarget(name: "MediaCodecsBench", dependencies: [switchboard("Media"), switchboard("MediaCodecs"), switchboard("SRTP")]),
        // Writes the ≥ 1,000,000-packet RTP capture of scripts/bench-rtp (no dependency: raw pcap bytes).
        .executableTarget(name: "RTPCaptureGen"),
        // Concurrent calls of MediaSessions on 127.0.0.1: CPU per call and tick lateness; run through scripts/bench-media-session.
        .executableTarget(name: "MediaSessionBench", dependencies: [
            switchboard("MediaRuntime"), switchboard("Media"), switchboard("MediaCodecs"), switchboard("SDP"), switchboard("SRTP"),
            switchboard("RTP"), switchboard("CSocket"),
        ]),
        // Our own caller: a Phone placing concurrent G.711 calls with a tone; run through scripts/bench-phone.
        .executableTarget(name: "PhoneLoad", dependencies: [
            switchboard("Switchboard"), switchboard("SIPRuntime"), switchboard("SIPMessage"), switchboard("MediaRuntime"),
            switchboard("NetworkIO"), switchboard("SDP"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
