#!/usr/bin/env python3
"""The PhoneServer HTTP API from the command line, for scripts/test-example's shutdown check.

  api.py connect A_URL B_URL B_SIP   A dials B, B answers; prints B's call id once both are up
  api.py ended B_URL ID REASON       waits (10 s at most) for B's call ID to end with REASON
"""
import json
import sys
import time
import urllib.request


def http(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def wait(what, check, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    sys.exit(f"timed out after {timeout} s waiting for {what}")


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
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
