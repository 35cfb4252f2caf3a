import PacketCapture

/// Ladder diagrams as one self-contained HTML page (`switchboard capture FILE --html OUT.html`).
///
/// Everything is inline: CSS, one SVG per call, the messages (HTML-escaped, in hidden `<pre>`
/// elements) and a few lines of script. A Content-Security-Policy of `default-src 'none'` lets
/// nothing be fetched, so the page opens with no network access. Hosts (IP:port) are columns in
/// order of appearance, time runs downwards, each message is an arrow labelled with its method
/// or status code; clicking an arrow shows the whole message below the diagram. Retransmissions
/// are dashed. The findings of the rule check (``CaptureAnalyzer/Call/findings``) mark their
/// frame's arrow (red, with a ⚠ and the rule in its summary) and are listed under the ladder.
public enum HTMLLadder {
    static let columnWidth = 200, rowHeight = 30, timeWidth = 110, headerHeight = 56

    /// The page for `calls` (each with its arrows; the arrows' ``CaptureAnalyzer/Arrow/text``
    /// is what a click shows). `preamble` is HTML (escaped by the caller) placed before the
    /// ladders, e.g. a conformance run's verdicts.
    /// `streams` (with their ``RTPStreamAnalyzer/Stream/timeline``) are plotted after the
    /// ladder of their call, those of no call drawn after the last ladder.
    public static func render(_ calls: [CaptureAnalyzer.Call], title: String, preamble: String = "",
                              streams: [RTPStreamAnalyzer.Stream] = []) -> String {
        var body = ""
        var index = 0
        var plotted = Set<Int>()
        for call in calls {
            body += section(call, firstIndex: &index)
            for (i, s) in streams.enumerated() where s.callID == call.callID && !plotted.contains(i) {
                plotted.insert(i)
                body += StreamPlot.figure(s)
            }
        }
        if calls.isEmpty { body += "<p>No calls.</p>\n" }
        let others = streams.indices.filter { !plotted.contains($0) }
        if !others.isEmpty {
            body += "<section class=\"streams\">\n<h2>RTP streams of no call drawn</h2>\n"
            for i in others { body += StreamPlot.figure(streams[i]) }
            body += "</section>\n"
        }
        return """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
        <title>SIP ladder: \(escape(title))</title>
        <style>
        body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; background: #fff; }
        h1 { font-size: 16px; } h2 { font-size: 14px; margin: 24px 0 4px; }
        svg { display: block; border: 1px solid #ddd; background: #fcfcfc; }
        .host { font: bold 12px monospace; text-anchor: middle; }
        .life { stroke: #999; stroke-dasharray: 4 3; }
        .time { font: 11px monospace; fill: #666; }
        .arrow { cursor: pointer; }
        .arrow line.shaft, .arrow path.shaft { stroke: #246; stroke-width: 1.5; fill: none; }
        .arrow .hit { stroke: transparent; stroke-width: 14; fill: none; }
        .arrow text { font: 12px monospace; text-anchor: middle; fill: #123; }
        .arrow.response line.shaft, .arrow.response path.shaft { stroke: #2a6a2a; }
        .arrow.error line.shaft, .arrow.error path.shaft { stroke: #b22; }
        .arrow.rtx line.shaft, .arrow.rtx path.shaft { stroke-dasharray: 5 4; }
        .arrow.finding line.shaft, .arrow.finding path.shaft { stroke: #d00; stroke-width: 2.5; }
        .arrow.finding text { fill: #b00; font-weight: bold; }
        ul.findings { margin: 6px 0 0; padding-left: 20px; } ul.findings li { color: #900; margin: 2px 0; }
        ul.findings code { color: #222; }
        .arrow:hover text, .arrow.selected text { font-weight: bold; }
        .arrow.selected line.shaft, .arrow.selected path.shaft { stroke-width: 3; }
        pre.message { display: none; }
        figure.stream { margin: 12px 0; } figure.stream figcaption { font: 12px monospace; margin-bottom: 4px; }
        svg.plot .axis { stroke: #999; } svg.plot .grid { stroke: #eee; } svg.plot text { font: 10px monospace; fill: #555; }
        svg.plot .jitter { stroke: #246; fill: none; stroke-width: 1.5; } svg.plot .loss { fill: #c33; }
        svg.plot .level { stroke: #2a6a2a; fill: none; stroke-width: 1.5; } svg.plot .panel-title { font-weight: bold; fill: #222; }
        #detail { white-space: pre-wrap; font: 12px monospace; background: #f4f4f4; border: 1px solid #ccc; padding: 8px; min-height: 2em; }
        </style>
        </head>
        <body>
        <h1>SIP ladder: \(escape(title))</h1>
        \(preamble)<p>Click an arrow to see its message.</p>
        \(body)<h2>Message</h2>
        <div id="detail-head"></div>
        <pre id="detail"></pre>
        <script>
        (function () {
          var arrows = document.querySelectorAll('g.arrow');
          var detail = document.getElementById('detail'), head = document.getElementById('detail-head');
          function show(g) {
            document.querySelectorAll('g.arrow.selected').forEach(function (x) { x.classList.remove('selected'); });
            g.classList.add('selected');
            var m = document.getElementById('message-' + g.getAttribute('data-index'));
            head.textContent = g.getAttribute('data-summary');
            detail.textContent = m ? m.textContent : '';
          }
          arrows.forEach(function (g) { g.addEventListener('click', function () { show(g); }); });
          document.body.setAttribute('data-arrows', String(arrows.length));
          if (arrows.length > 0) { show(arrows[0]); }
        })();
        </script>
        </body>
        </html>

        """
    }

    static func section(_ call: CaptureAnalyzer.Call, firstIndex index: inout Int) -> String {
        var hosts: [CaptureEndpoint] = []
        for a in call.arrows {
            if !hosts.contains(a.source) { hosts.append(a.source) }
            if !hosts.contains(a.destination) { hosts.append(a.destination) }
        }
        let width = timeWidth + columnWidth * max(hosts.count, 1) + 20
        let height = headerHeight + rowHeight * (call.arrows.count + 1)
        func x(_ h: CaptureEndpoint) -> Int { timeWidth + columnWidth / 2 + columnWidth * hosts.firstIndex(of: h)! }
        var svg = "<svg width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" role=\"img\">\n"
        svg += "<defs><marker id=\"head-\(index)\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\">"
        svg += "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#456\"/></marker></defs>\n"
        for h in hosts {
            svg += "<text class=\"host\" x=\"\(x(h))\" y=\"24\">\(escape(h.description))</text>\n"
            svg += "<line class=\"life\" x1=\"\(x(h))\" y1=\"34\" x2=\"\(x(h))\" y2=\"\(height - 8)\"/>\n"
        }
        let marker = "url(#head-\(index))"
        var messages = ""
        for (row, a) in call.arrows.enumerated() {
            let y = headerHeight + rowHeight * row + rowHeight / 2
            let t = CaptureAnalyzer.seconds(a.time.totalNanoseconds - call.first.totalNanoseconds, digits: 6)
            var classes = "arrow"
            if let code = Int(a.label.prefix(3)), a.label.count >= 3 {
                classes += code >= 300 ? " response error" : " response"
            }
            if a.retransmission { classes += " rtx" }
            let found = call.findings.filter { $0.frameNumber == a.frameNumber }
            if !found.isEmpty { classes += " finding" }
            var summary = "frame \(a.frameNumber), +\(t) s, \(a.source) → \(a.destination): \(a.label)"
            for f in found { summary += " — ⚠ \(f.party) broke \(f.rule.reference) [\(f.rule.id)]" }
            let label = found.isEmpty ? a.label : "⚠ " + a.label
            svg += "<text class=\"time\" x=\"4\" y=\"\(y + 4)\">+\(t)</text>\n"
            svg += "<g class=\"\(classes)\" data-index=\"\(index)\" data-summary=\"\(escape(summary))\">"
            let x1 = x(a.source), x2 = x(a.destination)
            if x1 == x2 {
                let d = "M\(x1),\(y - 8) h40 v16 h-40"
                svg += "<path class=\"hit\" d=\"\(d)\"/><path class=\"shaft\" d=\"\(d)\" marker-end=\"\(marker)\"/>"
                svg += "<text x=\"\(x1 + 90)\" y=\"\(y + 4)\">\(escape(label))</text>"
            } else {
                svg += "<line class=\"hit\" x1=\"\(x1)\" y1=\"\(y)\" x2=\"\(x2)\" y2=\"\(y)\"/>"
                svg += "<line class=\"shaft\" x1=\"\(x1)\" y1=\"\(y)\" x2=\"\(x2)\" y2=\"\(y)\" marker-end=\"\(marker)\"/>"
                svg += "<text x=\"\((x1 + x2) / 2)\" y=\"\(y - 5)\">\(escape(label))</text>"
            }
            svg += "<title>\(escape(summary))</title></g>\n"
            messages += "<pre class=\"message\" id=\"message-\(index)\">\(escape(a.text ?? "(message not kept)"))</pre>\n"
            index += 1
        }
        svg += "</svg>\n"
        if !call.findings.isEmpty {
            svg += "<ul class=\"findings\">\n"
            for f in call.findings {
                let t = CaptureAnalyzer.seconds(f.time.totalNanoseconds - call.first.totalNanoseconds, digits: 6)
                svg += "<li class=\"finding\" data-frame=\"\(f.frameNumber)\">frame \(f.frameNumber), +\(t) s, \(escape(f.party.description)): "
                    + "<code>\(escape(f.rule.reference)) [\(escape(f.rule.id))]</code> \(escape(f.detail))</li>\n"
            }
            svg += "</ul>\n"
        }
        let callID = call.callID.isEmpty ? "(no Call-ID)" : call.callID
        let broken = call.findings.isEmpty ? "" : ", \(call.findings.count) finding\(call.findings.count == 1 ? "" : "s")"
        return "<section class=\"call\">\n<h2>Call-ID \(escape(callID)) — \(escape(call.outcome.description)), \(call.arrows.count) messages\(broken)</h2>\n"
            + svg + messages + "</section>\n"
    }

    /// Escapes text for HTML element content and double-quoted attribute values.
    public static func escape(_ s: String) -> String {
        s.replacingScalars { c in
            switch c {
            case "&": return "&amp;"
            case "<": return "&lt;"
            case ">": return "&gt;"
            case "\"": return "&quot;"
            case "'": return "&#39;"
            case "\0": return "\u{FFFD}"
            default: return nil
            }
        }
    }
}

/// A stream's jitter, loss and level over time as one inline SVG of three panels sharing the
/// time axis (seconds after the stream's first packet).
enum StreamPlot {
    static let width = 720, panelHeight = 90, left = 64, right = 16, gap = 26, top = 8

    static func figure(_ s: RTPStreamAnalyzer.Stream) -> String {
        let ssrc = "0x" + String(s.key.ssrc, radix: 16, uppercase: true)
        var caption = "\(s.key.source) → \(s.key.destination) SSRC \(ssrc) \(s.payloadNames): \(s.packets) packets, lost \(s.lost)"
        caption += " (\(CaptureAnalyzer.seconds(Int64(s.lostPercent * 1e9), digits: 1))%)"
        if let j = s.maxJitter { caption += ", max jitter \(CaptureAnalyzer.seconds(Int64(j * 1e9), digits: 2)) ms" }
        if let m = s.mos { caption += ", MOS \(CaptureAnalyzer.seconds(Int64(m * 1e9), digits: 2))" }
        return "<figure class=\"stream\" data-stream=\"\(ssrc)\"><figcaption>\(HTMLLadder.escape(caption))</figcaption>\n" + svg(s.timeline) + "</figure>\n"
    }

    static func number(_ v: Double, digits: Int = 1) -> String { CaptureAnalyzer.seconds(Int64((v * 1e9).rounded()), digits: digits) }

    /// The three panels; an empty timeline draws empty panels.
    static func svg(_ t: [RTPTimelineBucket]) -> String {
        let height = top + 3 * panelHeight + 3 * gap
        let plotWidth = Double(width - left - right)
        let end = max(t.last.map { $0.start + $0.length } ?? 1, 1e-3)
        func x(_ seconds: Double) -> Double { Double(left) + seconds / end * plotWidth }
        var out = "<svg class=\"plot\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" role=\"img\">\n"
        let jitterMax = max(t.compactMap(\.maxJitter).max() ?? 0, 1)
        let lossMax = max(t.map(\.lossPercent).max() ?? 0, 1)
        let panels: [(String, String, Double, Double)] = [("jitter (ms)", "jitter", 0, jitterMax), ("loss (%)", "loss", 0, lossMax), ("level (dBov)", "level", -100, 0)]
        for (p, panel) in panels.enumerated() {
            let y0 = Double(top + p * (panelHeight + gap) + 14), h = Double(panelHeight - 14)
            func y(_ v: Double) -> Double { y0 + h - (min(max(v, panel.2), panel.3) - panel.2) / (panel.3 - panel.2) * h }
            out += "<g class=\"panel \(panel.1)-panel\">"
            out += "<text class=\"panel-title\" x=\"\(left)\" y=\"\(Int(y0) - 3)\">\(panel.0)</text>"
            out += "<line class=\"axis\" x1=\"\(left)\" y1=\"\(number(y0 + h))\" x2=\"\(width - right)\" y2=\"\(number(y0 + h))\"/>"
            out += "<line class=\"axis\" x1=\"\(left)\" y1=\"\(number(y0))\" x2=\"\(left)\" y2=\"\(number(y0 + h))\"/>"
            out += "<text x=\"\(left - 4)\" y=\"\(number(y0 + 4))\" text-anchor=\"end\">\(number(panel.3))</text>"
            out += "<text x=\"\(left - 4)\" y=\"\(number(y0 + h))\" text-anchor=\"end\">\(number(panel.2))</text>"
            switch panel.1 {
            case "loss":
                for b in t where b.lost > 0 {
                    let x0 = x(b.start), w = max(x(b.start + b.length) - x0 - 1, 1)
                    out += "<rect class=\"loss\" x=\"\(number(x0))\" y=\"\(number(y(b.lossPercent)))\" width=\"\(number(w))\" height=\"\(number(y0 + h - y(b.lossPercent)))\">"
                    out += "<title>\(number(b.start)) s: \(b.lost) lost (\(number(b.lossPercent))%)</title></rect>"
                }
            default:
                // One polyline per run of buckets that have a value.
                var runs: [[String]] = [[]]
                for b in t {
                    let v = panel.1 == "jitter" ? b.maxJitter : b.level
                    if let v {
                        runs[runs.count - 1].append("\(number(x(b.start + b.length / 2))),\(number(y(v)))")
                    } else if !runs[runs.count - 1].isEmpty {
                        runs.append([])
                    }
                }
                for r in runs where !r.isEmpty {
                    out += "<polyline class=\"\(panel.1)\" points=\"\(r.joined(separator: " "))\"/>"
                }
            }
            out += "</g>\n"
        }
        // The time axis under the last panel.
        let yAxis = top + 3 * panelHeight + 2 * gap + 12
        for k in 0...4 {
            let sec = end * Double(k) / 4
            out += "<text x=\"\(number(x(sec)))\" y=\"\(yAxis)\" text-anchor=\"middle\">\(number(sec)) s</text>"
        }
        return out + "\n</svg>\n"
    }
}
