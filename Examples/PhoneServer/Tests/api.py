#!/usr/bin/env python3
"""The PhoneServer HTTP API from the command line, for scripts/test-example's shutdown check.

  api.py connect A_URL B_URL B_SIP   A dials B, B answers; prints B's call id once both are up
  api.py ended B_URL ID REASON       waits (10 s at most) for B's call ID to end with REASON
  api.py heartbeat A_URL            GET /events: the opening comment, then a heartbeat (3 s at most)
  api.py errors A_URL B_SIP          the refusals: 400 (bad JSON, not a SIP URI, an id not a number), 404, 409
"""
import json
import sys
import time
import urllib.error
import urllib.request


from httpcheck import http, poll


def wait(what, check, timeout=10):
    return poll(what, check, sys.exit, timeout)


def calls(url):
    return http("GET", url + "/calls")["calls"]


def main():
    if sys.argv[1] == "connect":
        a, b, b_sip = sys.argv[2:5]
        dialed = http("POST", a + "/calls", {"to": b_sip})
        ringing = wait("B to ring", lambda: next((c for c in calls(b) if c["state"] == "incoming" and c["detail"] == "ringing"), None))
        http("POST", f"{b}/calls/{ringing['id']}/answer", timeout=35)
        wait("A's call to be up", lambda: any(c["id"] == dialed["id"] and c["state"] == "established" for c in calls(a)))
        print(ringing["id"])
    elif sys.argv[1] == "ended":
        b, call, reason = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        ended = wait(f"B's call {call} to end", lambda: next((c for c in calls(b) if c["id"] == call and c["state"] == "ended"), None))
        if ended["detail"] != reason:
            sys.exit(f"B's call {call} ended with {ended['detail']}, not {reason}")
        print(f"B's call {call} ended: {ended['detail']}")
    elif sys.argv[1] == "heartbeat":
        request = urllib.request.Request(sys.argv[2] + "/events")
        with urllib.request.urlopen(request, timeout=3) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                sys.exit(f"GET /events: content-type {response.headers.get('content-type')}")
            seen = []
            while ": heartbeat" not in seen:
                line = response.readline().decode().rstrip("\n")  # bounded by the socket timeout
                if not line and not seen:
                    continue
                seen.append(line)
                if len(seen) > 20:
                    sys.exit(f"GET /events: no heartbeat in {seen}")
            if not seen[0].startswith(": sip:"):
                sys.exit(f"GET /events: did not open with a comment naming the phone: {seen}")
        print("ok: GET /events is an event stream with heartbeats")
    elif sys.argv[1] == "errors":
        a, b_sip = sys.argv[2:4]
        expect(400, "POST", a + "/calls", b"{not json")
        expect(400, "POST", a + "/calls", {"to": "mailto:bob@127.0.0.1"}, says="not a SIP URI")
        expect(404, "POST", a + "/calls/999999/answer", says="no call 999999")
        expect(400, "POST", a + "/calls/x/hangup", says="Parameter")
        # An outgoing call cannot be answered; it is still ringing, so it cannot be held either.
        dialed = http("POST", a + "/calls", {"to": b_sip})
        expect(409, "POST", f"{a}/calls/{dialed['id']}/answer", says="answer")
        expect(409, "POST", f"{a}/calls/{dialed['id']}/digits", {"digits": "1"}, says="digits")
        http("POST", f"{a}/calls/{dialed['id']}/hangup")
        wait("the dialed call to end", lambda: any(c["id"] == dialed["id"] and c["state"] == "ended" for c in calls(a)))
        print("ok: 400 for bad JSON and a non-SIP URI, 404 for unknown calls, 409 for actions the call cannot take")
    else:
        sys.exit(__doc__)


def expect(status, method, url, body=None, says=None):
    """The request fails with this status (and a message containing `says`)."""
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            sys.exit(f"{method} {url}: {response.status}, expected {status}")
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        if error.code != status or (says and says not in text):
            sys.exit(f"{method} {url}: {error.code} {text}, expected {status} saying {says!r}")


if __name__ == "__main__":
    main()
