"""What both PhoneServer checks share: a JSON request to a route, and a bounded wait."""
import json
import time
import urllib.request


def http(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def poll(what, check, fail, timeout=10):
    """Calls check() every 0.1 s until it returns something true (returned), else fail(message)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    return fail(f"timed out after {timeout} s waiting for {what}")
