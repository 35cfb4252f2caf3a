// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Switchboard",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "SIPMessage", targets: ["SIPMessage"]),
        .library(name: "SDP", targets: ["SDP"]),
        .library(name: "SIPTransaction", targets: ["SIPTransaction"]),
        .library(name: "SIPDialog", targets: ["SIPDialog"]),
        .library(name: "SIPSimulation", targets: ["SIPSimulation"]),
        .library(name: "SIPRuntime", targets: ["SIPRuntime"]),
        .library(name: "NetworkIO", targets: ["NetworkIO"]),
        .library(name: "SIPTransport", targets: ["SIPTransport"]),
        .library(name: "SIPResolver", targets: ["SIPResolver"]),
        .library(name: "PacketCapture", targets: ["PacketCapture"]),
        .library(name: "SIPAuth", targets: ["SIPAuth"]),
        .library(name: "RTP", targets: ["RTP"]),
        .library(name: "Media", targets: ["Media"]),
        .library(name: "MediaCodecs", targets: ["MediaCodecs"]),
        .library(name: "SRTP", targets: ["SRTP"]),
        .library(name: "MediaRuntime", targets: ["MediaRuntime"]),
        .library(name: "SIPProxy", targets: ["SIPProxy"]),
        .library(name: "SIPLoad", targets: ["SIPLoad"]),
        .library(name: "CaptureAnalysis", targets: ["CaptureAnalysis"]),
        .library(name: "CaptureReplay", targets: ["CaptureReplay"]),
        .library(name: "Switchboard", targets: ["Switchboard"]),
        .library(name: "Conformance", targets: ["Conformance"]),
        .library(name: "SIPRules", targets: ["SIPRules"]),
        .library(name: "SIPpScenario", targets: ["SIPpScenario"]),
        .executable(name: "switchboard", targets: ["SwitchboardCLI"]),
        // C helpers the Benchmarks package (its own package, depending on this one by path) needs.
        .library(name: "CSocket", targets: ["CSocket"]),
        .library(name: "CHeapStats", targets: ["CHeapStats"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // Metrics of the phone and its endpoint (calls, transactions, retransmissions, registrations, media).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Phone as a Service with graceful shutdown, for servers that run a ServiceGroup.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // bytes ⇄ SIP messages; no I/O, no dependencies.
        .target(name: "SIPMessage"),
        // bytes ⇄ SDP sessions (RFC 8866, 4566, 4568); no I/O, no dependencies.
        .target(name: "SDP"),
        // RTP/RTCP packets, reception statistics, RTCP interval (RFC 3550, 3611, 8285, 5761); no I/O, no dependencies.
        .target(name: "RTP"),
        // Media logic without sockets or C libraries: jitter buffer, RFC 4733 DTMF, WAV and audio helpers, call quality, RTCP XR, packetizer.
        .target(name: "Media", dependencies: ["RTP"]),
        // Audio codecs: G.711 (ours) and Opus (libopus through COpus), with their SDP mapping.
        .target(name: "MediaCodecs", dependencies: ["SDP", "COpus"]),
        // The system libopus (libopus-dev) and wrappers for its variadic ctl calls.
        .target(name: "COpus", linkerSettings: [.linkedLibrary("opus")]),
        // The system libsrtp2 (libsrtp2-dev) and helpers that build its policies.
        .target(name: "CSRTP", linkerSettings: [.linkedLibrary("srtp2"), .linkedLibrary("crypto")]),
        // SRTP/SRTCP with SDES keys (RFC 3711, 4568, 7714) over libsrtp2; keys from the CSPRNG.
        .target(name: "SRTP", dependencies: ["SDP", "CSRTP"]),
        // The live media session of a call: RTP/RTCP sockets, codecs, SRTP, jitter buffer, DTMF, statistics.
        .target(name: "MediaRuntime", dependencies: ["RTP", "Media", "MediaCodecs", "SRTP", "SDP", "NetworkIO", "CSocket", .product(name: "Logging", package: "swift-log")]),
        // RFC 3261 §17 transaction machines and the transaction layer; no I/O.
        .target(name: "SIPTransaction", dependencies: ["SIPMessage"]),
        // RFC 3261 §12 dialogs (and, as issue 4 grows, INVITE sessions); no I/O.
        .target(name: "SIPDialog", dependencies: ["SIPMessage", "SIPAuth", "SIPTransaction"]),
        // A virtual clock and an in-memory lossy network driving the real machines (for tests).
        .target(name: "SIPSimulation", dependencies: ["SIPMessage", "SIPTransaction", "SIPDialog", "SIPAuth"]),
        // recvmmsg/sendmmsg, accept4, eventfd, sockaddr and socket-option helpers (_GNU_SOURCE) for
        // NetworkIO, SIPTransport and MediaRuntime.
        .target(name: "CSocket"),
        // What SIP, media and DNS share below their protocols: one socket address type (with the IP
        // address types), one I/O thread, one monotonic clock, and the silent default logger.
        .target(name: "NetworkIO", dependencies: ["CSocket", .product(name: "Logging", package: "swift-log")]),
        // The system OpenSSL (libssl, libcrypto) and wrappers for its macros, for TLS in SIPTransport.
        .target(name: "COpenSSL", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // UDP, TCP and TLS sockets for SIP: batched datagram I/O, stream framing, keep-alives.
        .target(name: "SIPTransport", dependencies: ["SIPMessage", "NetworkIO", "CSocket", "COpenSSL", .product(name: "Logging", package: "swift-log")]),
        // DNS messages, a UDP/TCP DNS client and RFC 3263 server location for SIP URIs.
        .target(name: "SIPResolver", dependencies: ["SIPMessage", "NetworkIO"]),
        // HTTP Digest for SIP (RFC 3261 §22, RFC 7616, RFC 8760): client answers, server checks; no I/O.
        .target(name: "SIPAuth", dependencies: ["SIPMessage", "COpenSSL"]),
        // pcap/pcapng reading, IPv4/IPv6 reassembly, UDP and TCP streams → SIP messages; no I/O in the decoder.
        // A SIGBUS guard for mapped capture files truncated by another process while being read.
        .target(name: "CMapGuard"),
        .target(name: "PacketCapture", dependencies: ["SIPMessage", "NetworkIO", "CMapGuard"]),
        // The live driver: endpoint (transports + transaction layer), timers on the monotonic clock, routing,
        // the traffic mirror, the user agent (sessions and registration on sockets).
        .target(name: "SIPRuntime", dependencies: ["SIPMessage", "SIPTransaction", "SIPTransport", "SIPDialog", "SIPAuth", "NetworkIO", .product(name: "Logging", package: "swift-log")]),
        // A registrar (digest) and a record-routing proxy to the registered contacts, on the live runtime.
        .target(name: "SIPProxy", dependencies: ["SIPMessage", "SIPTransaction", "SIPTransport", "SIPAuth", "SIPDialog", "SIPRuntime", "NetworkIO", .product(name: "Logging", package: "swift-log")]),
        // Load applications: the transaction-level answering server and call generator, the
        // dialog-level server, the echo line with a media session per call.
        .target(name: "SIPLoad", dependencies: ["SIPMessage", "SIPTransaction", "SIPTransport", "SIPDialog", "SIPRuntime", "SDP", "Media", "MediaRuntime",
                                               "NetworkIO", .product(name: "Logging", package: "swift-log")]),
        // The RFC rules a party can break (id, RFC section, requirement), their findings, and the checker of an
        // exchange with one device: shared by the conformance runner and the capture check; no I/O.
        .target(name: "SIPRules", dependencies: ["SIPMessage"]),
        // Captures → calls, dialogs, summaries, per-stream media details, the ladder model and its HTML page,
        // RTP stream analysis and audio out (G.711 and Opus decoded through MediaCodecs).
        .target(name: "CaptureAnalysis", dependencies: ["SIPMessage", "SIPRules", "SIPTransaction", "SIPDialog", "SDP", "PacketCapture", "NetworkIO", "RTP", "Media", "MediaCodecs", "SRTP"]),
        // One side of a captured call re-sent to a live device over UDP as a UA, its answers compared with the capture's.
        .target(name: "CaptureReplay", dependencies: ["CaptureAnalysis", "SIPMessage", "SIPTransport", "PacketCapture", "NetworkIO", .product(name: "Logging", package: "swift-log")]),
        // The face embedding servers import: Phone, calls with media, registration, the pcapng traffic mirror.
        .target(name: "Switchboard", dependencies: ["SIPMessage", "SDP", "SIPTransaction", "SIPTransport", "SIPAuth", "SIPDialog", "SIPRuntime",
                                                    "SIPResolver", "MediaRuntime", "Media", "PacketCapture", "NetworkIO", "CSocket", .product(name: "Logging", package: "swift-log"),
                                                    .product(name: "Metrics", package: "swift-metrics"),
                                                    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
        // Conformance runs: suites of tests named by ETSI TS 102 027-2 purposes, played against a device
        // over real sockets, and the rule checker naming the RFC rule the device broke.
        .target(name: "Conformance", dependencies: ["SIPMessage", "SIPRules", "SIPAuth", "SIPTransport", "PacketCapture", "CaptureAnalysis", "NetworkIO"]),
        // SIPp XML scenarios run natively (`switchboard sipp`): the scenario reader, SIPp's options and the runner over UDP.
        .target(name: "SIPpScenario", dependencies: ["SIPMessage", "SIPTransport", "SIPAuth", "NetworkIO", "COpenSSL", .product(name: "Logging", package: "swift-log")]),
        // The command line's logic and its text/JSON rendering, kept in a library so tests drive it directly.
        .target(name: "SwitchboardTools", dependencies: ["Switchboard", "SIPProxy", "SIPLoad", "CaptureAnalysis", "CaptureReplay", "SIPRules", "MediaRuntime", "Media", "SIPMessage", "SDP",
                                                         "SIPTransaction", "SIPTransport", "SIPRuntime", "SIPResolver", "PacketCapture", "SIPDialog", "SIPAuth", "CHeapStats",
                                                         "NetworkIO", .product(name: "Logging", package: "swift-log")]),
        // The `switchboard` executable (argument parsing only); its folder differs from `Switchboard` by more than case.
        .executableTarget(
            name: "SwitchboardCLI",
            dependencies: [
                "SwitchboardTools", "CaptureAnalysis", "PacketCapture", "Switchboard", "Conformance", "SIPpScenario", "SIPProxy", "SIPAuth", "SIPLoad", "SIPRuntime", "SIPTransport", "SIPMessage", "SIPDialog", "MediaRuntime", "SDP", "CSocket",
                "NetworkIO", .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Helpers shared by the test targets (paths, corpora, file reading, a seeded RNG).
        .target(name: "SwitchboardTestSupport", dependencies: ["SIPResolver", "NetworkIO"], path: "Tests/Support"),
        // glibc malloc statistics (mallinfo2, malloc_trim) for the memory benchmarks.
        .target(name: "CHeapStats"),
        .testTarget(name: "SIPMessageTests", dependencies: ["SwitchboardTestSupport", "SIPMessage"]),
        .testTarget(name: "SDPTests", dependencies: ["SDP", "SwitchboardTestSupport", "PacketCapture", "SIPMessage"]),
        .testTarget(name: "MediaCodecsTests", dependencies: ["SwitchboardTestSupport", "MediaCodecs", "SDP", "RTP", "PacketCapture"]),
        .testTarget(name: "SRTPTests", dependencies: ["SwitchboardTestSupport", "SRTP", "SDP", "RTP"]),
        .testTarget(name: "MediaRuntimeTests", dependencies: ["SwitchboardTestSupport", "MediaRuntime", "Media", "MediaCodecs", "SDP", "SRTP", "RTP", "NetworkIO"]),
        .testTarget(name: "RTPTests", dependencies: ["SwitchboardTestSupport", "RTP"]),
        .testTarget(name: "CaptureAnalysisTests", dependencies: ["SwitchboardTestSupport", "CaptureAnalysis", "SIPRules", "SIPMessage", "PacketCapture", "RTP", "NetworkIO", "MediaCodecs", "SRTP", "SDP"]),
        .testTarget(name: "MediaTests", dependencies: ["SwitchboardTestSupport", "Media", "RTP", "PacketCapture"]),
        .testTarget(name: "SIPTransactionTests", dependencies: ["SIPTransaction", "SIPMessage"]),
        .testTarget(name: "SIPDialogTests", dependencies: ["SwitchboardTestSupport", "SIPDialog", "SIPMessage", "SIPAuth"]),
        .testTarget(name: "SIPRuntimeTests", dependencies: ["SwitchboardTestSupport", "SIPRuntime", "SIPProxy", "SIPLoad", "SIPTransaction", "SIPTransport", "SIPMessage", "SIPDialog", "SIPAuth", "NetworkIO"]),
        .testTarget(name: "SIPSimulationTests", dependencies: ["SIPSimulation", "SIPTransaction", "SIPMessage", "SIPDialog", "SIPAuth"]),
        .testTarget(name: "NetworkIOTests", dependencies: ["NetworkIO"]),
        .testTarget(name: "SIPTransportTests", dependencies: ["SIPTransport", "SIPMessage", "NetworkIO", "SwitchboardTestSupport"]),
        .testTarget(name: "SIPResolverTests", dependencies: ["SwitchboardTestSupport", "SIPResolver", "SIPMessage", "NetworkIO"]),
        .testTarget(name: "SIPAuthTests", dependencies: ["SwitchboardTestSupport", "SIPAuth", "SIPMessage"]),
        .testTarget(name: "PacketCaptureTests", dependencies: ["SwitchboardTestSupport", "PacketCapture", "SIPMessage", "NetworkIO"]),
        .testTarget(name: "SwitchboardTests", dependencies: ["SwitchboardTestSupport", "Switchboard", "SIPRuntime", "SIPProxy", "SIPTransport", "SIPTransaction",
                                                      "SIPMessage", "SIPDialog", "SIPResolver", "MediaRuntime", "NetworkIO", "PacketCapture",
                                                      .product(name: "Logging", package: "swift-log"),
                                                      .product(name: "MetricsTestKit", package: "swift-metrics"),
                                                      .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
        .testTarget(name: "SwitchboardToolsTests", dependencies: ["SwitchboardTools", "Conformance", "SIPRules", "SIPAuth", "Switchboard", "SIPProxy", "SIPLoad", "CaptureAnalysis", "CaptureReplay", "SIPpScenario", "MediaRuntime", "Media", "SIPMessage", "SDP", "SIPRuntime", "SIPTransport", "PacketCapture", "SIPDialog", "SwitchboardTestSupport", "NetworkIO"]),
        .testTarget(name: "SIPpScenarioTests", dependencies: ["SIPpScenario", "SwitchboardTestSupport", "SIPLoad", "SIPRuntime", "SIPTransport", "SIPMessage", "SIPAuth", "NetworkIO"]),
        .testTarget(name: "ConformanceTests", dependencies: ["Conformance", "CaptureAnalysis", "SwitchboardTestSupport", "Switchboard", "SIPProxy", "SIPAuth", "SIPRuntime", "SIPMessage", "SIPTransport",
                                                       "PacketCapture", "NetworkIO"]),
    ],
    swiftLanguageModes: [.v6]
)
