import ArgumentParser
import Hummingbird
import Logging
import MediaRuntime
import NetworkIO
import ServiceLifecycle
import SIPMessage
import SIPRuntime
import Switchboard

/// A phone behind a web page: a Switchboard `Phone` and a Hummingbird server in one
/// `ServiceGroup`, stopped gracefully by SIGTERM or SIGINT (calls still up get their BYE).
@main
struct PhoneServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "PhoneServer",
        abstract: "A SIP phone with an HTTP API and a web page: dial, answer, hold and hang up from the browser.")

    @Option(help: "Where the HTTP server listens, HOST:PORT.")
    var http = "127.0.0.1:8080"

    @Option(help: "Where the phone listens for SIP over UDP, HOST:PORT (numeric host).")
    var sip = "127.0.0.1:5060"

    @Option(help: "The user part of the phone's SIP URI (sip:USER@HOST:PORT).")
    var user = "phone"

    @Flag(help: "Real media on each call: RTP with a 440 Hz tone. Without it the SDP has a placeholder port and no RTP flows.")
    var media = false

    @Option(help: "RTP ports for --media, LOW-HIGH.")
    var rtpPorts = "20000-29999"

    @Option(help: "Seconds between the heartbeat comments of GET /events.")
    var heartbeat: Double = 15

    @Option(help: "Log on stderr at this level and above (trace shows every SIP message).")
    var logLevel: Logger.Level = .info

    func validate() throws {
        guard heartbeat > 0 else { throw ValidationError("--heartbeat takes a positive number of seconds") }
    }

    func run() async throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        var logger = Logger(label: "phone-server")
        logger.logLevel = logLevel

        let sipAddress = try SocketAddress(sip)
        let identity = try SIPURI("sip:\(user)@\(sipAddress.ipString):\(sipAddress.port)")
        var configuration = SIPUserAgent.Configuration(endpoint: .init(listen: [.udp(sipAddress)]), identity: identity)
        configuration.logger = logger
        let phone = try Phone(name: user, configuration: configuration, media: try mediaOptions(host: sipAddress.ipString))

        let httpAddress = try SocketAddress(http)
        let center = CallCenter(phone: phone, heartbeat: .milliseconds(Int64(heartbeat * 1000)), logger: logger)
        let app = Application(
            router: makeRouter(center: center, identity: identity.description),
            configuration: .init(address: .hostname(httpAddress.ipString, port: Int(httpAddress.port)), serverName: "PhoneServer"),
            logger: logger)
        logger.info("phone \(identity), page on http://\(http)/")

        // Graceful shutdown runs in reverse order: the event streams close first (so the HTTP
        // server has no endless request to wait for), then the server, then the phone, which
        // ends the calls still up.
        let group = ServiceGroup(configuration: .init(
            services: [phone, app, center], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    private func mediaOptions(host: String) throws -> PhoneMediaOptions? {
        guard media else { return nil }
        let bounds = rtpPorts.split(separator: "-").compactMap { UInt16($0) }
        guard bounds.count == 2, bounds[0] < bounds[1] else { throw ValidationError("--rtp-ports takes LOW-HIGH") }
        var configuration = PhoneMediaOptions.defaultConfiguration
        configuration.localAddress = host
        configuration.portRange = bounds[0]...bounds[1]
        return PhoneMediaOptions(configuration: configuration, input: .tone(frequency: 440))
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
