import ArgumentParser
import Conformance
import Foundation
import SIPMessage
import PacketCapture
import SIPAuth
import SIPTransport

extension ConformanceTransport: ExpressibleByArgument {}
extension Misbehaviour: ExpressibleByArgument {}

struct Conform: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs a built-in conformance suite against a SIP device and names every RFC rule it breaks.",
        discussion: "Exit status: 0 when every test passed, 1 when a test failed or was inconclusive, 64 for bad arguments."
    )

    @Flag(name: .long, help: "List the suites and their tests (ETSI TS 102 027-2 purpose, RFC sections) and exit.")
    var list = false

    @Argument(help: "The suite to run (see --list).")
    var suite: String?

    @Argument(help: "The device under test, a SIP URI with an IP address: sip:user@127.0.0.1:5060.")
    var target: String?

    @Option(name: .long, help: "Transport to the device: udp, tcp or tls (tls: the uas, uac and proxy suites).")
    var transport: ConformanceTransport = .udp

    @Option(name: .customLong("tls-ca"), help: "For tls: the CA certificate (PEM file) the device's certificate must chain to (default: the system's store).")
    var tlsCA: String?

    @Flag(name: .customLong("tls-insecure"), help: "For tls: do not verify the device's certificate (a self-signed test certificate).")
    var tlsInsecure = false

    @Option(name: .customLong("tls-cert"), help: "For tls with the uac and proxy suites: the certificate chain (PEM file) the runner listens with.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM file).")
    var tlsKey: String?

    @Option(name: .long, help: "Run only these tests (comma-separated names).")
    var only: String?

    @Option(name: .long, help: "Seconds a test waits for a final response before concluding none is coming.")
    var timeout: Double = 4

    @Option(name: .long, help: "Write a JUnit XML report to this file.")
    var junit: String?

    @Option(name: .long, help: "Write an HTML report to this file: verdicts, and the findings and ladder of every test that did not pass.")
    var html: String?

    @Option(name: .long, help: "Record every datagram of the run, both ways, to this pcapng file.")
    var pcap: String?

    @Option(name: .long, help: "Username answering a registrar's digest challenges (registrar and auth suites; also the address of record's user when TARGET has none).")
    var user: String?

    @Option(name: .long, help: "Password for --user.")
    var password: String?

    @Option(name: .long, help: "The folder holding rfc4475/… and rfc5118/… (parser suite; default $SWITCHBOARD_CORPORA).")
    var corpus: String?

    @Flag(name: .long, help: "Print the report as JSON (every test's findings and messages) instead of the text summary.")
    var json = false

    func run() async throws {
        if list {
            for name in ConformanceSuites.names {
                print("\(name): \(ConformanceSuites.summary(name))")
                for t in ConformanceSuites.all[name] ?? [] { print(t.listLine) }
            }
            return
        }
        guard let suite, let target else { throw ValidationError("give a SUITE and a TARGET, or --list") }
        guard let uri = try? SIPURI(target) else { throw ValidationError("\(target) is not a SIP URI") }
        guard timeout > 0, timeout <= 60 else { throw ValidationError("--timeout takes 0 to 60 seconds") }
        let capture: CaptureWriter?
        do { capture = try pcap.map { path throws(CaptureWriteError) in try CaptureWriter(path: path) } } catch { throw ValidationError("\(error)") }
        defer { capture?.close() }
        guard (user == nil) == (password == nil) else { throw ValidationError("--user and --password go together") }
        let credentials = user.map { DigestCredentials(username: $0, password: password ?? "") }
        let folder = corpus ?? ProcessInfo.processInfo.environment["SWITCHBOARD_CORPORA"]
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        let tls = TLSConfiguration(certificateChain: tlsCert.map { .file($0) }, privateKey: tlsKey.map { .file($0) },
                                   trustedCertificates: tlsCA.map { [.file($0)] } ?? [], verifyPeer: !tlsInsecure)
        let runner = ConformanceRunner(target: uri, transport: transport, responseTimeout: .milliseconds(Int64(timeout * 1000)), capture: capture,
                                       credentials: credentials, corpus: folder, tls: tls)
        let quiet = json
        let report: ConformanceReport
        do {
            report = try await runner.run(suite: suite, only: only.map { Set($0.split(separator: ",").map(String.init)) }) { i, n, r in
                if !quiet { print(ConformanceReport.progressLine(i, n, r)) }
            }
        } catch {
            throw ValidationError("\(error)")
        }
        if let junit { try report.junitXML.write(toFile: junit, atomically: true, encoding: .utf8) }
        if let html { try report.html.write(toFile: html, atomically: true, encoding: .utf8) }
        if json { print(report.json) } else { report.summaryLines.forEach { print($0) } }
        if !report.allPassed { throw ExitCode(1) }
    }
}
