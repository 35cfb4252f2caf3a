// swift-tools-version:6.0
// An example of embedding Switchboard in a Swift server: a Hummingbird service with a Phone,
// calls placed and answered through HTTP routes, and their events streamed to a small page.
// A package of its own, so the library stays free of SwiftNIO; it depends on Switchboard by
// path (the folder two levels up).
import PackageDescription

let package = Package(
    name: "PhoneServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Switchboard", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "PhoneServer",
            dependencies: [
                .product(name: "Switchboard", package: "Switchboard"),
                // Types the phone's configuration names (SIPURI, SocketAddress, SIPUserAgent, media).
                .product(name: "SIPMessage", package: "Switchboard"),
                .product(name: "NetworkIO", package: "Switchboard"),
                .product(name: "SIPRuntime", package: "Switchboard"),
                .product(name: "MediaRuntime", package: "Switchboard"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
