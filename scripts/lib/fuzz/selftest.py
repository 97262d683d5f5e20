"""The campaign's own checks, checked without a relay: a verdict that can
never fire, or a parser that misreads an answer, would let every run pass.

    PYTHONPATH=scripts/lib python3 -m fuzz.selftest     (scripts/test runs it before the campaign)
"""

import random
import socket
import sys
import threading

from types import SimpleNamespace

from . import bodies, fulldisk, known, largefield, mutate, outage, traffic, verdicts, wire
from .pgproxy import CuttableProxy


def response(status, body, content_type="application/json", headers=()):
    return wire.Response(status, "", [("content-type", content_type)] + list(headers), body)


def served(raw):
    """A one-shot loopback server that answers `raw` to whatever it reads."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(raw)
        connection.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def checks():
    envelope = b'{"error":{"type":"InvalidRequest","message":"token: must be hex","field":"token"}}'
    yield "a JSON error in the envelope passes", verdicts.answer_problems(response(400, envelope)) == []
    yield "an HTML error is non-JSON", [k for k, _ in verdicts.answer_problems(response(400, b"<html>x</html>", "text/html"))] == [verdicts.NON_JSON]
    yield "HTML under a JSON content type is non-JSON", [k for k, _ in verdicts.answer_problems(response(413, b"<html>"))] == [verdicts.NON_JSON]
    yield "JSON without the envelope fails", [k for k, _ in verdicts.answer_problems(response(400, b'{"reason":"x"}'))] == [verdicts.BAD_ENVELOPE]
    yield "a 500 fails", verdicts.SERVER_ERROR in [k for k, _ in verdicts.answer_problems(response(500, envelope))]
    yield "an allowed 501 passes", verdicts.answer_problems(response(501, envelope), allowed_5xx={501}, allowed={400, 501}) == []
    yield "a status outside the allowed set fails", [k for k, _ in verdicts.answer_problems(response(200, b"{}"), allowed={400})] == [verdicts.WRONG_STATUS]

    batch = b'{"results":[{"apnsId":"A-1"},{"ok":false,"error":{"type":"APNsRejected","message":"m","apnsId":"B-2"}}]}'
    yield "apns-ids of a batch, header and error", verdicts.answered_ids(response(200, batch, headers=[("apns-id", "C-3")])) == {"a-1", "b-2", "c-3"}
    describe = b'{"method":"POST","headers":{"apns-id":"d-4"}}'
    yield "a describe echo is no answered apns-id", verdicts.answered_ids(response(200, describe)) == set()

    port = served(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")
    result = wire.exchange(port, b"GET / HTTP/1.1\r\n\r\n", timeout=5)
    yield "1xx skipped, chunked body joined", result.first is not None and result.first.status == 400 and result.first.body == b'{"a":1}'
    port = served(b"")
    yield "a close without an answer is seen", wire.exchange(port, b"GET / HTTP/1.1\r\n\r\n", timeout=5).closed

    def run(seed):
        rng = random.Random(seed)
        return [mutate.mutate(rng, rng.choice(bodies.seeds(rng)))[4] for _ in range(200)]

    yield "the same seed gives the same cases", run(42) == run(42) and run(42) != run(43)
    nested = mutate.encode({"a": "@@deep-array-3000@@"})
    yield "deep nesting is encoded", nested.count(b"[") == 3000 and nested.startswith(b'{"a": [[')
    yield "known limits are narrow", (known.reason("framing", verdicts.NON_JSON, "bad chunk size") is not None
                                      and known.reason("framing", verdicts.SERVER_ERROR, "bad chunk size") is None
                                      and known.reason("framing", verdicts.NON_JSON, "conflicting Content-Length") is None
                                      and known.reason("mutation", verdicts.NON_JSON, "bad chunk size") is None)
    tally = verdicts.Tally(strict=True)
    tally.violation("framing", verdicts.NON_JSON, "bad chunk size", "x")
    yield "--strict counts known limits", len(tally.violations) == 1 and not tally.known
    yield from fault_checks()


def echo_server():
    """A loopback server that echoes every connection until closed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def echo(connection):
        while data := connection.recv(4096):
            connection.sendall(data)
        connection.close()

    def serve():
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=echo, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def through(port, data=b"ping"):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(data)
            return sock.recv(4096)
    except OSError:
        return None


def fault_checks():
    rng = random.Random(7)
    yield "large values are exact in bytes", all(len(largefield.text(rng, size).encode()) == size for size in (64, 255, 256, 257, 1001) for _ in range(20))
    yield "over-limit is over", all(largefield.over(rng, 256) > 256 for _ in range(100))
    expectations = [largefield.case(random.Random(f"s-{index}"), index)[5] for index in range(300)]
    refused = {expect[1] for expect in expectations if expect[0] == "refuse"}
    yield "largefield mutates every field over its limit", {"app", "snapshot.id", "snapshot.surfaceId", "collapseId", "apnsId", "token",
                                                              "attributesType", "channelId", "headers", "apns-*"} <= refused
    yield "largefield keeps at-limit cases", sum(1 for expect in expectations if expect[0] == "accept") > 100
    yield "a field is named by its member", largefield.named({"error": {"type": "InvalidRequest", "message": "m", "field": "snapshot.id"}}, "snapshot.id")
    yield "another field is not", not largefield.named({"error": {"type": "InvalidRequest", "message": "app: x", "field": "app"}}, "snapshot.id")

    # The idempotency oracle: a second push or a new apns-id for a key fails; a replay or a 409/503 passes.
    def judged(pushes, repeats):
        tally = verdicts.Tally()
        key = outage.Key("k1", "ab" * 32, {})
        key.first = (200, ("ok", "id-1"))
        key.answered_in_outage = True
        key.repeats = repeats
        requests = [{"path": "/3/device/" + "ab" * 32, "apnsId": f"id-{n}"} for n in range(1, pushes + 1)]
        outage.judge(SimpleNamespace(tally=tally), "self", [key], {key.token: key}, requests)
        return sorted({kind for _, kind, _, _ in tally.violations})
    yield "idempotency: one push and replays pass", judged(1, [("after", 200, ("ok", "id-1")), ("outage", 409, ("error", "IdempotencyKeyInFlight"))]) == []
    yield "idempotency: a second push fails", "second push for one key" in judged(2, [("after", 200, ("ok", "id-1"))])
    yield "idempotency: a new apns-id fails", "repeat not answered with the first answer" in judged(1, [("after", 200, ("ok", "id-2"))])
    yield "idempotency: a 422 fails", "repeat not answered with the first answer" in judged(1, [("after", 422, ("error", "IdempotencyKeyReused"))])

    # The full-disk oracle: a lost row, a refused send that went out, an undocumented answer, a second row all fail.
    ok_send = traffic.Outcome("send", ["aa" * 32], 200, items=[("ok", "id-1")])
    refused = traffic.Outcome("send", ["bb" * 32], 503, "Unavailable", items=[("refused", "Unavailable")])
    batch = traffic.Outcome("batch", ["cc" * 32, "dd" * 32], 200, items=[("ok", "id-3"), ("refused", "Unavailable")])
    broken = traffic.Outcome("send", ["ee" * 32], 500, "Internal", items=[("error", "Internal")])
    reached = [{"path": "/3/device/" + "aa" * 32, "apnsId": "id-1"}, {"path": "/3/device/" + "cc" * 32, "apnsId": "id-3"}]

    def disk(outcomes, reached, rows):
        return sorted({kind for kind, _ in fulldisk.verdicts(outcomes, reached, rows)[0]})
    yield "fulldisk: answered = rows, refusals sent nothing: passes", disk([ok_send, refused, batch], reached, {"id-1": 1, "id-3": 1}) == []
    yield "fulldisk: a lost row fails", disk([ok_send, batch], reached, {"id-1": 1}) == ["answered send without its row", "send that reached APNs without a row"]
    yield "fulldisk: a second row fails", disk([ok_send], reached[:1], {"id-1": 2}) == ["duplicated audit row"]
    yield "fulldisk: a refused send that reached APNs fails", "refused send reached APNs" in disk(
        [refused], [{"path": "/3/device/" + "bb" * 32, "apnsId": "id-2"}], {"id-2": 1})
    yield "fulldisk: a 500 is not a documented refusal", disk([broken], [], {}) == ["not a documented refusal"]

    # The Postgres proxy really cuts and really comes back.
    proxy = CuttableProxy("127.0.0.1", echo_server()).start()
    before = through(proxy.port)
    held = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    held.sendall(b"x")
    held.recv(16)
    proxy.cut()
    try:
        cut_held = held.recv(16) == b""
    except OSError:
        cut_held = True
    during = through(proxy.port)
    proxy.restore()
    after = through(proxy.port)
    proxy.stop()
    outcome = (before, cut_held, during, after)
    yield f"the proxy forwards, cuts (held and new connections) and comes back: {outcome}", outcome == (b"ping", True, None, b"ping")


def main():
    failed = 0
    for name, passed in checks():
        if not passed:
            failed += 1
            print(f"FAIL  fuzz selftest: {name}")
    print(f"fuzz selftest: {'ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
