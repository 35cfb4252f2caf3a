import PacketCapture
import CaptureAnalysis
import CaptureReplay
import SIPMessage
import NetworkIO
import SIPTransport

/// `switchboard capture FILE --sipp-scenario OUT.xml`: one party's side of a captured call
/// written as a SIPp scenario (``SIPpScenarioExport``).
public enum CaptureSideCommand {
    /// What the command prints and its exit status.
    public struct Outcome: Sendable {
        /// The text printed.
        public var text: String
        /// 0 when written; 65 when the capture cannot be read; 1 when the call or party is not
        /// found; 73 when the file cannot be written.
        public var exitCode: Int32
    }

    /// Writes `party`'s side of call `call` (a number from 1 or a Call-ID; the first call when
    /// `nil`) in the capture at `path` as a SIPp scenario to `output`.
    public static func exportScenario(path: String, call: String?, party: String, output: String) -> Outcome {
        let side: CaptureParty
        let captured: CapturedCall
        let xml: String
        do throws(CaptureSideError) {
            side = try CaptureParty(parsing: party)
            captured = try CapturedCall.load(path: path, call: call)
            xml = try SIPpScenarioExport.scenario(captured, party: side, source: path)
        } catch {
            if case .file = error { return Outcome(text: "\(path): \(error)\n", exitCode: 65) }
            return Outcome(text: "\(path): \(error)\n", exitCode: 1)
        }
        guard ParseCommand.writeFile(output, Array(xml.utf8)) else { return Outcome(text: "\(output): cannot write\n", exitCode: 73) }
        let sends = xml.ranges(of: "<send").count, recvs = xml.ranges(of: "<recv").count
        return Outcome(text: "wrote \(output): the \(side) side of call \(captured.number) (Call-ID \(captured.callID)), \(sends) sends, \(recvs) receives\n",
                       exitCode: 0)
    }
}

extension CaptureSideCommand {
    /// Replays `party`'s side of call `call` in the capture at `path` against the device at
    /// `target` (``CaptureReplay``) and renders the steps and differences as text or JSON.
    /// Exit status: 0 without differences, 1 with, 64 for a bad party or target, 65 when the
    /// capture cannot be read, 69 when the socket cannot be opened.
    /// `listen` (`IP:PORT`) is our address: where the device calls when the callee's side is
    /// replayed. `configure` sets the rest (the transport, TLS, timers).
    public static func replay(path: String, call: String?, party: String, target: String, listen: String? = nil, json: Bool,
                              configure: (inout CaptureReplayOptions) -> Void = { _ in }) async -> Outcome {
        let side: CaptureParty
        let uri: SIPURI
        do { side = try CaptureParty(parsing: party) } catch { return Outcome(text: "--replay: \(error)\n", exitCode: 64) }
        do { uri = try SIPURI(target) } catch { return Outcome(text: "--to \(target): \(error)\n", exitCode: 64) }
        var local: SocketAddress?
        if let listen {
            do { local = try SocketAddress(listen) } catch { return Outcome(text: "--listen \(listen): \(error)\n", exitCode: 64) }
        }
        let captured: CapturedCall
        do { captured = try CapturedCall.load(path: path, call: call) } catch {
            if case .file = error { return Outcome(text: "\(path): \(error)\n", exitCode: 65) }
            return Outcome(text: "\(path): \(error)\n", exitCode: 64)
        }
        var options = CaptureReplayOptions(target: uri)
        options.local = local
        configure(&options)
        let report: CaptureReplay.Report
        do { report = try await CaptureReplay.run(captured, party: side, options: options) } catch {
            if case .socket = error { return Outcome(text: "replay: \(error)\n", exitCode: 69) }
            return Outcome(text: "replay: \(error)\n", exitCode: 64)
        }
        let code: Int32 = report.differences.isEmpty ? 0 : 1
        if json { return Outcome(text: replayJSON(report, path: path, party: side).rendered() + "\n", exitCode: code) }
        return Outcome(text: replayText(report, path: path, party: side), exitCode: code)
    }

    static func replayText(_ r: CaptureReplay.Report, path: String, party: CaptureParty) -> String {
        var out = "replay of the \(party) \(r.party) of Call-ID \(r.capturedCallID) in \(path)\n"
        out += "to \(r.device) from \(r.local) over \(r.transport), Call-ID \(r.callID), \(r.datagramsSent) \(r.transport == .udp ? "datagrams" : "messages") sent\n"
        for (i, s) in r.steps.enumerated() {
            out += "  step \(i + 1): \(s.sent)\(s.wasSent ? "" : " (not sent)")\n"
            out += "    captured: \(s.captured.isEmpty ? "-" : s.captured.joined(separator: ", "))\n"
            out += "    live:     \(s.live.isEmpty ? "-" : s.live.joined(separator: ", "))\n"
        }
        if r.differences.isEmpty { return out + "no differences\n" }
        out += "\(r.differences.count) difference\(r.differences.count == 1 ? "" : "s"):\n"
        for d in r.differences { out += "  \(d)\n" }
        return out
    }

    static func replayJSON(_ r: CaptureReplay.Report, path: String, party: CaptureParty) -> JSONValue {
        .object([
            ("file", .string(path)), ("party", .string(party.description)), ("partyAddress", .string(r.party.description)),
            ("capturedCallID", .string(r.capturedCallID)), ("callID", .string(r.callID)),
            ("device", .string(r.device.description)), ("local", .string(r.local.description)), ("datagramsSent", .int(r.datagramsSent)), ("transport", .string(r.transport.viaToken)),
            ("steps", .array(r.steps.map {
                .object([("sent", .string($0.sent)), ("wasSent", .bool($0.wasSent)),
                         ("captured", .array($0.captured.map { .string($0) })), ("live", .array($0.live.map { .string($0) }))])
            })),
            ("differences", .array(r.differences.map {
                .object([("kind", .string($0.kind.rawValue)), ("step", .int($0.step)), ("captured", $0.captured.map { .string($0) } ?? .null),
                         ("live", $0.live.map { .string($0) } ?? .null), ("header", $0.header.map { .string($0) } ?? .null),
                         ("description", .string($0.description))])
            })),
        ])
    }
}
