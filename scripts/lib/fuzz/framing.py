"""Raw HTTP/1.1 framing probes over TCP: requests whose framing is ambiguous,
malformed or over a limit. Each may be answered with a fitting 4xx (or 501
for a transfer coding the relay does not implement) in the JSON envelope,
or closed cleanly; never a crash, never HTML, never a success for a request
whose body boundary is in doubt."""

import json
import random
import threading

from . import bodies, verdicts, wire

REJECT = {400}
AMBIGUOUS = {400, 411, 413, 501}


def describe_body():
    return json.dumps(bodies.send_fields(random.Random(7), snapshot=bodies.snapshot())).encode()


def probes(port, key):
    """(name, bytes, options for Campaign.run) for every probe."""
    host = f"Host: 127.0.0.1:{port}"
    auth = f"Authorization: Bearer {key}"
    body = describe_body()
    length = len(body)

    def post(*headers, payload=body, target="/v1/describe", version="HTTP/1.1", sep=b"\r\n"):
        lines = [f"POST {target} {version}".encode(), host.encode(), auth.encode(), b"Content-Type: application/json"]
        lines += [h if isinstance(h, bytes) else h.encode() for h in headers]
        return sep.join(lines) + sep + sep + payload

    def get(target="/v1/admin/retry", *headers, version="HTTP/1.1", with_host=True, sep=b"\r\n", method="GET"):
        lines = [f"{method} {target} {version}".encode()] + ([host.encode()] if with_host else []) + [auth.encode()]
        lines += [h if isinstance(h, bytes) else h.encode() for h in headers]
        return sep.join(lines) + sep + sep

    chunked = b"%x\r\n" % length + body + b"\r\n0\r\n\r\n"
    huge_value = "x" * 200_000
    many_headers = [f"X-Fuzz-{i}: {i}" for i in range(20_000)]
    return [
        ("conflicting Content-Length", post(f"Content-Length: {length}", f"Content-Length: {length + 1}"), dict(allowed=REJECT, close_ok=True)),
        ("Content-Length list", post(f"Content-Length: {length}, {length + 1}"), dict(allowed=REJECT, close_ok=True)),
        ("Content-Length and Transfer-Encoding", post(f"Content-Length: {length}", "Transfer-Encoding: chunked", payload=chunked),
         dict(allowed=REJECT, close_ok=True)),
        ("Transfer-Encoding with space before colon", post("Transfer-Encoding : chunked", payload=chunked),
         dict(allowed=REJECT, close_ok=True)),
        ("Content-Length with space before colon", post(f"Content-Length : {length}"), dict(allowed=REJECT, close_ok=True)),
        ("Transfer-Encoding: gzip", post("Transfer-Encoding: gzip", payload=chunked), dict(allowed={400, 501}, allowed_5xx={501}, close_ok=True)),
        ("Transfer-Encoding: gzip, chunked", post("Transfer-Encoding: gzip, chunked", payload=chunked),
         dict(allowed={400, 415, 501}, allowed_5xx={501}, close_ok=True)),
        ("Transfer-Encoding: chunked, chunked", post("Transfer-Encoding: chunked, chunked", payload=chunked),
         dict(allowed=AMBIGUOUS, allowed_5xx={501}, close_ok=True)),
        ("Transfer-Encoding with vertical tab", post(b"Transfer-Encoding: \x0bchunked", payload=chunked),
         dict(allowed=AMBIGUOUS, allowed_5xx={501}, close_ok=True)),
        ("bad chunk size", post("Transfer-Encoding: chunked", payload=b"zz\r\n" + body + b"\r\n0\r\n\r\n"), dict(allowed=REJECT, close_ok=True)),
        ("chunk size overflow", post("Transfer-Encoding: chunked", payload=b"ffffffffffffffffff\r\n" + body + b"\r\n0\r\n\r\n"),
         dict(allowed={400, 413}, close_ok=True)),
        ("negative Content-Length", post("Content-Length: -1"), dict(allowed=REJECT, close_ok=True)),
        ("Content-Length with plus sign", post(f"Content-Length: +{length}"), dict(allowed=REJECT, close_ok=True)),
        ("Content-Length in hex", post(f"Content-Length: 0x{length:x}"), dict(allowed=REJECT, close_ok=True)),
        ("over-limit Content-Length", post("Content-Length: 1000000000000", payload=b"{"), dict(allowed={413}, close_ok=True)),
        ("Content-Length past 2^64", post("Content-Length: 99999999999999999999999", payload=b"{"), dict(allowed={400, 413}, close_ok=True)),
        ("Expect 100-continue over the limit", post("Content-Length: 100000000", "Expect: 100-continue", payload=b""),
         dict(allowed={413, 417}, close_ok=True)),
        ("bare LF line endings", post(f"Content-Length: {length}", sep=b"\n"), dict(allowed=REJECT, close_ok=True)),
        # RFC 9112 2.2 and RFC 9110 5.5: reject, or read CR and NUL in a field value as SP.
        ("bare CR inside a header", post(b"X-Fuzz: a\rb", f"Content-Length: {length}"), dict(allowed={200, 400}, close_ok=True)),
        ("NUL in a header value", post(b"X-Fuzz: a\x00b", f"Content-Length: {length}"), dict(allowed={200, 400}, close_ok=True)),
        ("NUL in a header name", post(b"X-Fu\x00zz: a", f"Content-Length: {length}"), dict(allowed=REJECT, close_ok=True)),
        ("header without colon", post(b"X-Fuzz", f"Content-Length: {length}"), dict(allowed=REJECT, close_ok=True)),
        # RFC 9112 5.2: reject obs-fold with 400, or replace it with SP.
        ("obsolete line folding", post(b"X-Fuzz: a", b" folded", f"Content-Length: {length}"), dict(allowed={200, 400}, close_ok=True)),
        ("malformed Accept-Encoding: ;", get("/v1/admin/retry", "Accept-Encoding: ;"), dict(allowed={200, 400})),
        ("malformed Accept-Encoding: gzip;q=", get("/v1/admin/retry", "Accept-Encoding: gzip;q=, ,;"), dict(allowed={200, 400})),
        ("Accept-Encoding on an error", post(f"Content-Length: 2", "Accept-Encoding: ;", payload=b"{]"), dict(allowed={400})),
        ("huge header value", get("/v1/admin/retry", f"X-Fuzz: {huge_value}"), dict(allowed={400, 413, 431}, close_ok=True)),
        ("twenty thousand headers", get("/v1/admin/retry", *many_headers), dict(allowed={400, 413, 431}, close_ok=True)),
        ("huge URI", get("/v1/admin/retry?" + "a" * 200_000), dict(allowed={400, 413, 414, 431}, close_ok=True)),
        ("HTTP/1.1 without Host", get("/v1/admin/retry", with_host=False), dict(allowed=REJECT, close_ok=True)),
        ("two Host headers", get("/v1/admin/retry", "Host: other.example"), dict(allowed=REJECT, close_ok=True)),
        ("HTTP/1.0 without Host", get("/v1/admin/retry", version="HTTP/1.0", with_host=False), dict(allowed={200})),
        ("HTTP/1.0 POST", post(f"Content-Length: {length}", version="HTTP/1.0"), dict(allowed={200})),
        ("HTTP/2.0 in the request line", get("/v1/admin/retry", version="HTTP/2.0"), dict(allowed={400, 505}, allowed_5xx={505}, close_ok=True)),
        ("HTTP/1.1 in lowercase", get("/v1/admin/retry", version="http/1.1"), dict(allowed={400, 505}, allowed_5xx={505}, close_ok=True)),
        ("HTTP/9.9", get("/v1/admin/retry", version="HTTP/9.9"), dict(allowed={400, 505}, allowed_5xx={505}, close_ok=True)),
        ("absolute-form URI", get(f"http://127.0.0.1:{port}/v1/admin/retry"), dict(allowed={200, 400})),
        ("asterisk-form on GET", get("*"), dict(allowed={400, 404}, close_ok=True)),
        ("unknown method", get("/v1/admin/retry", method="FUZZ"), dict(allowed={400, 405, 501}, allowed_5xx={501}, close_ok=True)),
        ("method with odd token", get("/v1/admin/retry", method="G\x01T"), dict(allowed={400, 405, 501}, allowed_5xx={501}, close_ok=True)),
        ("TRACE", get("/v1/admin/retry", method="TRACE"), dict(allowed={400, 405, 501}, allowed_5xx={501}, close_ok=True)),
        ("CONNECT", get(f"127.0.0.1:{port}", method="CONNECT"), dict(allowed={400, 404, 405, 501}, allowed_5xx={501}, close_ok=True)),
        ("NUL in the path", get("/v1/admin\x00/retry"), dict(allowed={400, 404}, close_ok=True)),
        ("space in the path", get("/v1/admin /retry"), dict(allowed={400, 404, 505}, allowed_5xx={505}, close_ok=True)),
        ("percent-encoded NUL in the path", get("/v1/channels/%00?app=checkout-ios&environment=development", method="DELETE"),
         dict(allowed={400, 404})),
        ("bad percent-encoding in the path", get("/v1/channels/%zz?app=checkout-ios&environment=development", method="DELETE"),
         dict(allowed={400, 404})),
        ("garbage request line", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40, dict(allowed=REJECT, close_ok=True)),
        ("empty lines before the request", b"\r\n\r\n" + get("/v1/admin/retry"), dict(allowed={200, 400})),
        ("body longer than Content-Length", post(f"Content-Length: {length}", payload=body + b"GARBAGE / HTTP/1.1\r\n\r\n"),
         dict(expect=2, allowed={200, 400, 404, 405, 501}, allowed_5xx={501}, close_ok=True)),
        ("body shorter than Content-Length", post(f"Content-Length: {length + 10}"), dict(allowed={400, 408}, close_ok=True, timeout=15)),
    ]


def pipelined(port, key):
    host = f"127.0.0.1:{port}"
    one = wire.request_bytes("GET", "/v1/admin/retry", [("Host", host), ("Authorization", "Bearer " + key)])
    body = describe_body()
    two = wire.request_bytes("POST", "/v1/describe", [("Host", host), ("Authorization", "Bearer " + key),
                                                       ("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body)
    three = wire.request_bytes("GET", "/healthz", [("Host", host), ("Connection", "close")])

    def all_answered(result):
        statuses = [response.status for response in result.responses]
        if statuses != [200, 200, 200]:
            return [(verdicts.WRONG_STATUS, f"pipelined GET, POST, GET answered {statuses}")]
        return []

    return one + two + three, all_answered


def run(campaign):
    relay = campaign.relay
    key = relay.keys["backend"]
    for name, data, options in probes(relay.port, key):
        campaign.run("framing", name, data, **options)
    data, check = pipelined(relay.port, key)
    campaign.run("framing", "three pipelined requests", data, expect=3, check=check)
    slow_request(campaign)
    campaign.health("framing")


def slow_request(campaign):
    """A request that stops half-way: the relay must cut it off after its
    connection timeout (3 s in the fuzz configuration) and keep serving others."""
    relay = campaign.relay
    partial = (f"POST /v1/describe HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\nAuthorization: Bearer {relay.keys['backend']}\r\n"
               "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"app\":").encode()
    holder = {}
    thread = threading.Thread(target=lambda: holder.setdefault("result", wire.exchange(relay.port, partial, timeout=12)))
    thread.start()
    campaign.run("framing", "a request served while another is stalled", wire.request_bytes(
        "GET", "/healthz", [("Host", f"127.0.0.1:{relay.port}"), ("Connection", "close")]), allowed={200}, timeout=5)
    thread.join()
    result = holder["result"]
    campaign.tally.case("framing")
    if result.timed_out:
        campaign.tally.violation("framing", verdicts.WRONG_STATUS, "slow partial request",
                                 "still open after 12 s; the connection timeout is 3 s")
    for response in result.responses:
        for kind, detail in verdicts.answer_problems(response, allowed={400, 408}):
            campaign.tally.violation("framing", kind, "slow partial request", detail)
    campaign.crashed("framing", "slow partial request", result)
