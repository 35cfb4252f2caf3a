import PacketCapture
import CaptureAnalysis

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

