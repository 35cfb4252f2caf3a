import PacketCapture
import CaptureAnalysis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Renders an ``RTPStreamAnalyzer`` (`switchboard capture FILE --rtp`): a table laid out as
/// `tshark -q -z rtp,streams` prints it (times relative to the capture's first frame, in
/// seconds; deltas and jitter in ms; `X` for a problem), with sequence errors and MOS added,
/// then per stream what tshark does not show (wall-clock start and end in UTC, RTCP reports,
/// DTMF digits, silence) and the calls whose audio went one way.
enum RTPStreamText {
    static func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
    static func format(_ v: Double, _ digits: Int) -> String {
        guard v.isFinite, abs(v) < 1e15 else { return "\(v)" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let r = (abs(v) * scale).rounded()
        let whole = Int(r / scale), frac = Int(r.truncatingRemainder(dividingBy: scale))
        let f = String(frac)
        return (v < 0 && r > 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + String(repeating: "0", count: digits - f.count) + f : "")
    }
    static func relative(_ t: CaptureTimestamp, _ origin: CaptureTimestamp?) -> Double {
        Double(t.totalNanoseconds - (origin ?? t).totalNanoseconds) / 1e9
    }

    /// `2026-11-25T18:47:05.123456Z`.
    static func iso8601(_ t: CaptureTimestamp) -> String {
        var secs = time_t(t.seconds)
        var tm = tm()
        gmtime_r(&secs, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let micro = String(Int(t.nanoseconds) / 1000)
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))."
            + String(repeating: "0", count: 6 - micro.count) + micro + "Z"
    }

    static func render(_ a: RTPStreamAnalyzer, origin: CaptureTimestamp?) -> String {
        var out = "========================= RTP Streams ========================\n"
        out += "   Start time      End time     Src IP addr  Port    Dest IP addr  Port       SSRC          Payload  Pkts         Lost"
            + "   Min Delta(ms)  Mean Delta(ms)   Max Delta(ms)  Min Jitter(ms) Mean Jitter(ms)  Max Jitter(ms) Problems?  SeqErr   MOS\n"
        for s in a.streams {
            var line = pad(format(relative(s.first, origin), 6), 13) + " " + pad(format(relative(s.last, origin), 6), 13)
            line += " " + pad("\(s.key.source.address)", 15) + " " + pad("\(s.key.source.port)", 5)
            line += " " + pad("\(s.key.destination.address)", 15) + " " + pad("\(s.key.destination.port)", 5)
            line += " " + RTPAudioExportName.hex(s.key.ssrc) + " " + pad(s.payloadNames, 16) + " " + pad("\(s.packets)", 5)
            line += " " + pad("\(s.lost) (\(format(s.lostPercent, 1))%)", 12)
            // As tshark prints what it could not compute: minimums -1, means and maximums 0.
            for (k, v) in [s.minDelta, s.meanDelta, s.maxDelta, s.minJitter, s.meanJitter, s.maxJitter].enumerated() {
                line += " " + pad(v.map { format($0, 3) } ?? (k % 3 == 0 ? "-1.000" : "0.000"), 15)
            }
            line += " " + (s.problem ? "X" : " ")
            line += " " + pad("\(s.sequenceErrors)", 15) + " " + pad(s.mos.map { format($0, 2) } ?? "-", 5)
            // SRTP streams not decrypted say why after the MOS (plain streams keep tshark's row).
            if let srtp = s.srtp, srtp.noKey || srtp.wrongKey { line += srtp.noKey ? " SRTP, no key" : " SRTP, wrong key" }
            out += line + "\n"
        }
        out += "==============================================================\n"
        for (n, s) in a.streams.enumerated() {
            out += "\nstream \(n + 1): \(s.key.source) -> \(s.key.destination) SSRC \(RTPAudioExportName.hex(s.key.ssrc)) \(s.payloadNames)"
                + (s.announced ? "" : " (found by heuristic)") + (s.callID.map { " call \($0)" } ?? "") + "\n"
            out += "  \(iso8601(s.first)) to \(iso8601(s.last)) (frame \(s.firstFrame)), \(s.packets) packets, \(s.expected) expected, "
                + "\(s.sequenceErrors) sequence errors, \(s.markers) markers"
            if let f = s.maxDeltaFrame { out += ", max delta at frame \(f)" }
            out += "\n"
            if let srtp = s.srtp { out += "  " + srtpLine(srtp, packets: s.packets) + "\n" }
            if let m = s.mos { out += "  MOS \(format(m, 2))" + (s.silent == true ? ", silent" : "") + "\n" } else if s.silent == true { out += "  silent\n" }
            for d in s.dtmf {
                out += "  DTMF \(d.digit) at \(format(relative(d.time, origin), 6)) s (\(iso8601(d.time))), duration \(d.duration)\(d.ended ? "" : " (no end)")\n"
            }
            for r in s.reports {
                out += "  RTCP \(r.inSenderReport ? "SR" : "RR") at \(format(relative(r.time, origin), 6)) s from \(r.reporter): fraction lost "
                    + "\(format(r.fractionLost * 100, 1))%, cumulative lost \(r.cumulativeLost), jitter \(r.jitter)"
                    + (r.jitterMilliseconds.map { " (\(format($0, 3)) ms)" } ?? "") + "\n"
            }
        }
        for c in a.calls where c.oneWay { out += "\none-way audio: call \(c.callID)\n" }
        return out
    }

    /// `SRTP AES_CM_128_HMAC_SHA1_80 (key from SDP): 250 decrypted, 0 authentication failures`.
    static func srtpLine(_ srtp: SRTPStreamStatus, packets: Int) -> String {
        guard let suite = srtp.suite else { return "SRTP: no key (payloads not analysed)" }
        var line = "SRTP \(suite) (key from \(srtp.keySource == .commandLine ? "--srtp-key" : "SDP")): "
        if srtp.wrongKey { line += "wrong key, all \(srtp.authenticationFailures) packets failed authentication" }
        else { line += "\(srtp.decrypted) decrypted, \(srtp.authenticationFailures) authentication failures" }
        if srtp.replayed > 0 { line += ", \(srtp.replayed) replayed" }
        return line
    }

    static func json(_ a: RTPStreamAnalyzer, origin: CaptureTimestamp?) -> [(String, JSONValue)] {
        func num(_ v: Double?) -> JSONValue { v.map { .number($0) } ?? .null }
        func time(_ t: CaptureTimestamp) -> JSONValue {
            .object([("utc", .string(iso8601(t))), ("relative", .number(relative(t, origin)))])
        }
        let streams: [JSONValue] = a.streams.map { s in
            .object([
                ("source", .string(s.key.source.description)), ("destination", .string(s.key.destination.description)),
                ("ssrc", .string(RTPAudioExportName.hex(s.key.ssrc))),
                ("payloads", .array(s.formats.map { .object([("type", .int(Int($0.payloadType))), ("name", .string($0.name)), ("clockRate", .int($0.clockRate))]) })),
                ("announced", .bool(s.announced)), ("callID", s.callID.map { .string($0) } ?? .null),
                ("start", time(s.first)), ("end", time(s.last)), ("firstFrame", .int(s.firstFrame)),
                ("packets", .int(s.packets)), ("expected", .int(s.expected)), ("lost", .int(s.lost)), ("lostPercent", .number(s.lostPercent)),
                ("sequenceErrors", .int(s.sequenceErrors)), ("markers", .int(s.markers)),
                ("minDelta", num(s.minDelta)), ("meanDelta", num(s.meanDelta)), ("maxDelta", num(s.maxDelta)),
                ("maxDeltaFrame", s.maxDeltaFrame.map { .int($0) } ?? .null),
                ("minJitter", num(s.minJitter)), ("meanJitter", num(s.meanJitter)), ("maxJitter", num(s.maxJitter)),
                ("problem", .bool(s.problem)), ("mos", num(s.mos)), ("silent", s.silent.map { .bool($0) } ?? .null),
                ("dtmf", .array(s.dtmf.map {
                    .object([("digit", .string(String($0.digit))), ("event", .int(Int($0.event))), ("time", time($0.time)),
                             ("duration", .int(Int($0.duration))), ("ended", .bool($0.ended))])
                })),
                ("rtcp", .array(s.reports.map {
                    .object([("time", time($0.time)), ("reporter", .string($0.reporter.description)), ("senderReport", .bool($0.inSenderReport)),
                             ("fractionLost", .number($0.fractionLost)), ("cumulativeLost", .int(Int($0.cumulativeLost))),
                             ("jitter", .int(Int($0.jitter))), ("jitterMs", num($0.jitterMilliseconds))])
                })),
                ("senderReports", .int(s.senderReports)),
                ("srtp", s.srtp.map { x in
                    .object([("suite", x.suite.map { .string($0) } ?? .null), ("keySource", x.keySource.map { .string($0.rawValue) } ?? .null),
                             ("decrypted", .int(x.decrypted)), ("srtpFailures", .int(x.authenticationFailures)), ("replayed", .int(x.replayed)),
                             ("wrongKey", .bool(x.wrongKey)), ("noKey", .bool(x.noKey))])
                } ?? .null),
            ])
        }
        let calls: [JSONValue] = a.calls.map { c in
            .object([("callID", .string(c.callID)), ("announced", .array(c.announced.map { .string($0.description) })),
                     ("streams", .array(c.streams.map { .int($0 + 1) })), ("oneWay", .bool(c.oneWay))])
        }
        return [("origin", origin.map { .string(iso8601($0)) } ?? .null), ("rtpStreams", .array(streams)), ("rtpCalls", .array(calls)),
                ("rtcpPackets", .int(a.rtcpPackets)), ("unmatchedReportBlocks", .int(a.unmatchedReportBlocks)),
                ("srtcpDecrypted", .int(a.srtcpDecrypted)), ("srtcpDropped", .int(a.srtcpDropped))]
    }
}

/// The SSRC as tshark prints it (`0x58F33DEA`).
enum RTPAudioExportName {
    static func hex(_ v: UInt32) -> String {
        let h = String(v, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 8 - h.count) + h
    }
}
