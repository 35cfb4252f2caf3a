#!/usr/bin/env python3
"""Browser test of the PhoneServer example, in headless Chromium driven over the DevTools
protocol (through --remote-debugging-pipe: no port, no Python package beyond the standard library).

Two PhoneServer instances run on 127.0.0.1 (started by scripts/test-example). On A's page the
test types B's SIP URI in the dial form and submits it; it answers the call on B through B's
HTTP route; then, on A's page, it holds, resumes, sends digits and hangs up with the call's
buttons. It passes when A's page log shows the call's states in order (calling or ringing, then
established, then ended), B received the digits, and both sides ended the call. Every wait is
bounded; on failure it prints what it saw and exits 1.

Usage: browser-test.py CHROMIUM A_HTTP_URL B_HTTP_URL B_SIP_URI SCREENSHOT_DIR
"""
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from httpcheck import http, poll


class Failure(Exception):
    pass


class Browser:
    """Chromium headless, spoken to in DevTools protocol messages over fds 3 (in) and 4 (out),
    each message a JSON object ended by a NUL byte."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="phoneserver-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Out of the way of 3 and 4, closed on exec; the child gets its two ends as 3 and 4.
        hi = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)]
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def child_fds():
            os.dup2(hi[0], 3)
            os.dup2(hi[1], 4)

        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}/profile", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, preexec_fn=child_fds, close_fds=False,
            start_new_session=True)
        for fd in hi:
            os.close(fd)
        self.writer, self.reader = to_chrome_w, from_chrome_r
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the browser and its renderers
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - already gone
            pass
        for fd in (self.writer, self.reader):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.reader], [], [], left)[0]:
                raise Failure("Chromium did not answer in time")
            chunk = os.read(self.reader, 1 << 16)
            if not chunk:
                raise Failure(f"Chromium closed the pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, timeout=15, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.writer, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1100, "height": 820, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise Failure(f"page script failed: {expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise Failure(f"timed out after {timeout} s waiting for {what}")

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


def wait_http(what, check, timeout=10):
    def fail(message):
        raise Failure(message)
    return poll(what, check, fail, timeout)


LOG_STATES = "[...document.querySelectorAll('#log li[data-event=state]')].map(li => [Number(li.dataset.call), li.dataset.state, li.textContent])"
LOG_TEXT = "[...document.querySelectorAll('#log li')].map(li => li.textContent)"


def run(browser, a_url, b_url, b_sip, shots):
    browser.open(a_url + "/")
    browser.wait_for("document.body && document.body.dataset.events === 'open'", "A's page to open its event stream")

    # Dial from the form: type B's URI, submit.
    browser.evaluate("document.getElementById('to').focus()")
    browser.send("Input.insertText", {"text": b_sip})
    browser.evaluate("document.querySelector('#dial button[type=submit]').click()")
    call = browser.wait_for("(() => { const li = document.querySelector('#log li[data-event=state]'); return li && Number(li.dataset.call); })()",
                            "the dialed call in A's log")
    row = f"#calls tr[data-call='{call}']"

    # B rings; answer it through B's route.
    incoming = wait_http("B to ring", lambda: next((c for c in http("GET", b_url + "/calls")["calls"]
                                                     if c["state"] == "incoming" and c["detail"] == "ringing"), None))
    browser.wait_for(f"!!document.querySelector(\"#log li[data-call='{call}'][data-state=ringing]\")", "A's log to show ringing")
    answered = http("POST", f"{b_url}/calls/{incoming['id']}/answer", timeout=35)
    if answered["state"] != "established":
        raise Failure(f"B's answer returned {answered}")
    browser.wait_for(f"!!document.querySelector(\"{row}[data-state=established]\")", "A's call row to show established")

    # Hold, resume and digits from A's page buttons.
    browser.evaluate(f"document.querySelector(\"{row} button[data-action=hold]\").click()")
    browser.wait_for(f"[...document.querySelectorAll('#log li')].some(li => li.textContent.includes('established localHold'))",
                     "A's log to show the hold")
    browser.wait_for(f"!document.querySelector(\"{row} button[data-action=resume]\").disabled", "the Resume button")
    browser.evaluate(f"document.querySelector(\"{row} button[data-action=resume]\").click()")
    browser.wait_for(f"!!document.querySelector(\"{row}\").textContent.includes('active')", "A's call to be active again")
    browser.evaluate(f"document.querySelector(\"{row} input\").value = '12#'")
    browser.evaluate(f"document.querySelector(\"{row} button[data-action=send]\").click()")
    wait_http("B to receive the digits 12#",
              lambda: any(c["id"] == incoming["id"] and c["digits"] == "12#" for c in http("GET", b_url + "/calls")["calls"]))
    browser.wait_for(f"!!document.querySelector(\"{row}\").textContent.includes('active')", "A's row to refresh")
    browser.screenshot(os.path.join(shots, "phoneserver-established.png"))

    # Hang up from A's page.
    browser.evaluate(f"document.querySelector(\"{row} button[data-action=hangup]\").click()")
    browser.wait_for(f"!!document.querySelector(\"#log li[data-call='{call}'][data-state=ended]\")", "A's log to show the end")
    browser.wait_for(f"!!document.querySelector(\"{row}[data-state=ended]\")", "A's row to show ended")
    browser.screenshot(os.path.join(shots, "phoneserver-ended.png"))

    states = [s for (c, s, _) in browser.evaluate(LOG_STATES) if c == call]
    print("A's page log:\n  " + "\n  ".join(browser.evaluate(LOG_TEXT)))
    print("A's log, call", call, "states:", " → ".join(states))
    def first(state):
        return states.index(state) if state in states else None
    setup = [i for i in (first("calling"), first("ringing")) if i is not None]
    if first("ringing") is None or first("established") is None or first("ended") is None \
            or not max(setup) < first("established") < first("ended") or states[-1] != "ended" \
            or not browser.evaluate(f"document.querySelector(\"#log li[data-call='{call}'][data-state=ended]\").textContent") \
            .endswith("ended hung up by local"):
        raise Failure(f"A's log did not show calling/ringing → established → ended: {states}")
    ended = wait_http("B to see the call ended", lambda: next((c for c in http("GET", b_url + "/calls")["calls"]
                                                              if c["id"] == incoming["id"] and c["state"] == "ended"), None))
    print("B's call:", ended["state"], ended["detail"], "digits", ended["digits"])
    if ended["detail"] != "hung up by remote":
        raise Failure(f"B's call did not end by the remote party: {ended}")


def main():
    chromium, a_url, b_url, b_sip, shots = sys.argv[1:6]
    started = time.monotonic()
    # A SIGTERM (the caller's timeout) still closes the browser, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    browser = Browser(chromium)
    try:
        run(browser, a_url, b_url, b_sip, shots)
    except Exception as error:  # noqa: BLE001 - every failure is reported with what the page showed
        print(f"FAILED: {error}")
        try:
            print("A's page log:\n  " + "\n  ".join(browser.evaluate(LOG_TEXT)))
            print("A's page error line:", browser.evaluate("document.getElementById('error').textContent"))
            browser.screenshot(os.path.join(shots, "phoneserver-failure.png"))
        except Exception as inner:  # noqa: BLE001
            print(f"(the page could not be read: {inner})")
        return 1
    finally:
        browser.close()
    print(f"ok: the call went through its states on A's page ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
