import Foundation
import Hummingbird

/// `GET /`: one self-contained page (no external assets). A form dials, a table lists the calls
/// with their actions, and a log shows every event from `EventSource('/events')`.
struct Page: ResponseGenerator {
    let html: String

    init(identity: String) {
        html = Self.template.replacingOccurrences(of: "{{identity}}", with: Self.escaped(identity))
    }

    func response(from request: Request, context: some RequestContext) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    static let template = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <title>PhoneServer {{identity}}</title>
    <style>
      body { font: 15px system-ui, sans-serif; margin: 1.5em; color: #222; }
      h1 { font-size: 1.3em; margin: 0 0 .2em; }
      #status { font-size: .9em; color: #a00; }
      #status.open { color: #080; }
      form { margin: 1em 0; display: flex; gap: .5em; }
      input[type=text] { padding: .35em; font: inherit; }
      #to { width: 22em; }
      table { border-collapse: collapse; margin: 1em 0; }
      th, td { border-bottom: 1px solid #ddd; padding: .35em .6em; text-align: left; }
      td.state { font-weight: 600; }
      td input { width: 4em; }
      button { font: inherit; padding: .25em .6em; }
      #error { color: #a00; min-height: 1.2em; }
      #log { font: 13px ui-monospace, monospace; background: #f6f6f6; padding: .6em 1em .6em 2.5em;
             max-height: 24em; overflow-y: auto; }
    </style>
    </head>
    <body>
    <h1>PhoneServer <code>{{identity}}</code></h1>
    <div id="status">events: connecting…</div>
    <form id="dial">
      <input type="text" id="to" name="to" placeholder="sip:user@127.0.0.1:5060" required>
      <button type="submit">Dial</button>
    </form>
    <div id="error"></div>
    <table>
      <thead><tr><th>#</th><th>direction</th><th>remote</th><th>state</th><th></th><th>actions</th></tr></thead>
      <tbody id="calls"></tbody>
    </table>
    <h2>Events</h2>
    <ol id="log"></ol>
    <script>
    "use strict";
    const $ = (id) => document.getElementById(id);

    async function post(path, body) {
      $("error").textContent = "";
      const response = await fetch(path, { method: "POST", headers: { "content-type": "application/json" },
                                           body: body === undefined ? undefined : JSON.stringify(body) });
      if (!response.ok) {
        let message = response.statusText;
        try { message = (await response.json()).error.message; } catch (e) {}
        $("error").textContent = `${path}: ${response.status} ${message}`;
      }
      refresh();
      return response;
    }

    function button(label, enabled, onclick) {
      const b = document.createElement("button");
      b.textContent = label;
      b.disabled = !enabled;
      b.dataset.action = label.toLowerCase();
      b.onclick = onclick;
      return b;
    }

    function cell(row, text, className) {
      const td = row.insertCell();
      td.textContent = text;
      if (className) td.className = className;
      return td;
    }

    async function refresh() {
      const response = await fetch("/calls");
      if (!response.ok) return;
      const { calls } = await response.json();
      const body = $("calls");
      body.replaceChildren();
      for (const call of calls) {
        const row = body.insertRow();
        row.dataset.call = call.id;
        row.dataset.state = call.state;
        cell(row, call.id);
        cell(row, call.direction);
        cell(row, call.remote);
        cell(row, call.state, "state");
        cell(row, [call.detail, call.digits && `digits ${call.digits}`].filter(Boolean).join(", "));
        const actions = row.insertCell();
        const up = call.state === "established", ended = call.state === "ended";
        const held = up && (call.detail === "localHold" || call.detail === "bothHold");
        const base = `/calls/${call.id}/`;
        actions.append(
          button("Answer", call.state === "incoming", () => post(base + "answer")),
          button("Reject", call.state === "incoming", () => post(base + "reject")),
          button("Hold", up && !held, () => post(base + "hold")),
          button("Resume", held, () => post(base + "resume")),
          button("Hangup", !ended, () => post(base + "hangup")));
        const digits = document.createElement("input");
        digits.type = "text";
        digits.placeholder = "12#";
        digits.disabled = !up;
        actions.append(" ", digits, button("Send", up, () => post(base + "digits", { digits: digits.value })));
      }
    }

    function logEvent(event) {
      const item = document.createElement("li");
      item.dataset.call = event.call;
      item.dataset.event = event.event;
      if (event.state) item.dataset.state = event.state;
      const time = new Date().toLocaleTimeString();
      const what = [event.event, event.state, event.detail].filter(Boolean).join(" ");
      item.textContent = `${time}  call ${event.call} (${event.direction} ${event.remote}): ${what}`;
      const log = $("log");
      log.append(item);
      log.scrollTop = log.scrollHeight;
    }

    $("dial").addEventListener("submit", (e) => {
      e.preventDefault();
      post("/calls", { to: $("to").value.trim() });
    });

    const events = new EventSource("/events");
    events.onopen = () => {
      $("status").textContent = "events: connected";
      $("status").className = "open";
      document.body.dataset.events = "open";
      refresh();
    };
    events.onerror = () => {
      $("status").textContent = "events: reconnecting…";
      $("status").className = "";
      document.body.dataset.events = "closed";
    };
    events.onmessage = (message) => {
      logEvent(JSON.parse(message.data));
      refresh();
    };
    refresh();
    </script>
    </body>
    </html>
    """
}
