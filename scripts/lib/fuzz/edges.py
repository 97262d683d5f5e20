"""Deterministic edge cases the random fuzzer would reach only by luck:
numbers at and past every integer limit in the fields and query parameters
that hold them (`since`, `limit`, dates, `priority`), and control characters
in every field that ends up in an APNs request header (which must be refused
with 400: a header value cannot carry them, and a CR or LF there would split
the request), and Idempotency-Key values past its rules on every sending
route. Nothing here may crash the relay or answer 5xx."""

import json
import random

from . import bodies, verdicts

BIG = [2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30, -1, 1e308, -1e308, 5e-324, 1.5]
SINCE = ["9223372036854775807s", "9223372036854775808s", "9223372036854775807d", "106751991167301d", "2562047788015216h",
         "153722867280912931m", "99999999999999999999h", "0s", "-1h", "1e3h", "1H", "1 h", "0001h", "",
         "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2026-02-30T00:00:00Z",
         "2026-11-22T00:00:00.999999999999999Z", "2026-11-22T00:00:00+99:99", "292277026596-12-04T15:30:07Z",
         "-292277022657-01-27T08:29:52Z", "2026-11-22T24:00:00Z"]
LIMIT = ["0", "-1", "10001", "9223372036854775807", "9223372036854775808", "1.5", "", "1e3", "0x10", " 5"]
CONTROL = ["\x00", "\r", "\n", "\r\n", "\x01", "\x1b", "\x7f"]


def header_fields():
    """(seed name, path into the body) of fields the relay copies into an APNs header or path."""
    return [
        ("describe", ("token",)), ("describe", ("collapseId",)), ("describe", ("apnsId",)),
        ("describe", ("app",)), ("describe", ("environment",)),
        ("describe-raw", ("headers", "apns-collapse-id")), ("describe-raw", ("headers", "apns-topic")),
        ("describe-raw", ("headers", "apns-push-type")), ("describe-raw", ("headers", "apns-expiration")),
        ("describe-broadcast", ("channelId",)), ("channel-create", ("storagePolicy",)),
    ]


def seed_named(rng, name):
    found = {seed.name: seed for seed in bodies.seeds(rng)}
    if name == "describe-raw":
        seed = found["send-raw"]
        seed.path, seed.sends = "/v1/describe", False
        return seed
    if name == "describe-broadcast":
        seed = found["broadcast"]
        seed.path, seed.sends = "/v1/describe", False
        return seed
    return found[name]


def put(body, path, value):
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def run(campaign):
    rng = random.Random(0)
    relay = campaign.relay
    for value in SINCE:
        seed = seed_named(rng, "dead-tokens")
        seed.query["since"] = value
        campaign.run("edges", f"GET /v1/dead-tokens since={value!r}", bodies.encode(seed, relay.keys, relay.port))
    for value in LIMIT:
        seed = seed_named(rng, "dead-tokens")
        seed.query["limit"] = value
        campaign.run("edges", f"GET /v1/dead-tokens limit={value!r}", bodies.encode(seed, relay.keys, relay.port), allowed={400})
    for field in ["expiration", "timestamp", "staleDate", "dismissalDate", "priority", "relevanceScore"]:
        for value in BIG:
            for name in ("send-update", "describe"):
                seed = seed_named(rng, name)
                if name == "describe":
                    seed.body.update(operation="end", priority=5)
                seed.body[field] = value
                campaign.run("edges", f"POST {seed.path} {field}={value!r}", bodies.encode(seed, relay.keys, relay.port))
    for name, path in header_fields():
        base = seed_named(rng, name)
        original = base.body
        for step in path:
            original = original.get(step, "") if isinstance(original, dict) else ""
        original = original if isinstance(original, str) and original else "abc"
        if path == ("apnsId",):
            original = "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d"
        for control in CONTROL:
            for position in ("end", "middle"):
                seed = seed_named(rng, name)
                value = original + control if position == "end" else original[:2] + control + original[2:]
                put(seed.body, path, value)
                campaign.run("edges", f"POST {seed.path} {'.'.join(path)} with {control!r} at the {position}",
                             bodies.encode(seed, relay.keys, relay.port), allowed={400, 403, 404})
    # /3/device: control characters in the path token and the relay's own headers.
    for control in ["%00", "%0d%0a", "%0a", "%01", "%7f"]:
        seed = seed_named(rng, "device")
        seed.path = seed.path[:20] + control + seed.path[20:]
        campaign.run("edges", f"POST /3/device/<token with {control}>", bodies.encode(seed, relay.keys, relay.port),
                     allowed={400, 404}, check=no_send)
    # Strings that reach an audit column (snapshot id, surface id, the app a
    # refusal names) with the characters COPY's text format must escape, and
    # a NUL that Postgres text cannot hold. The relay may refuse or send; the
    # audit check at the end is the oracle: every answered apns-id has its row.
    for text in ["\x00", "a\tb", "a\nb", "a\\.b", "\\N", "a\rb", "é🙂", "\x1b"]:
        for field in ("id", "surfaceId"):
            seed = seed_named(rng, "send-alert")
            seed.body["snapshot"][field] = "fuzz" + text + "x"
            campaign.run("edges", f"POST /v1/send snapshot.{field} with {text!r}", bodies.encode(seed, relay.keys, relay.port))
    # /3/device: control characters in the apns-* headers the relay forwards
    # (HTTP lets some through; APNs' HTTP/2 peer resets the stream on them).
    for header in ["apns-collapse-id", "apns-topic", "apns-push-type", "apns-id", "apns-expiration", "apns-priority",
                   "apns-relay-app", "apns-relay-environment"]:
        for control in ["\x01", "\x1b", "\x7f"]:
            seed = seed_named(rng, "device")
            value = dict(seed.headers).get(header, "abc")
            seed.headers = [(name, v) for name, v in seed.headers if name != header] + [(header, value[:2] + control + value[2:])]
            campaign.run("edges", f"POST /3/device {header} with {control!r}", bodies.encode(seed, relay.keys, relay.port),
                         allowed={400, 403, 404}, check=no_send)
    # Idempotency-Key: 1 to 255 printable ASCII bytes, one per request, on
    # every sending route; anything else is 400 and nothing is sent.
    for name in ("send-alert", "batch", "device"):
        bad = [value for value in (["", "k" * 256] + ["ab" + control + "cd" for control in CONTROL + ["\t", "\x80"]])]
        for value in bad:
            seed = seed_named(rng, name)
            if name == "batch":
                # Refused per item: that item answers InvalidRequest naming its
                # key, the batch's other items go on (docs/api.md).
                seed.body["items"][0]["idempotencyKey"] = value
                campaign.run("edges", f"POST {seed.path} idempotency key {value[:12]!r}",
                             bodies.encode(seed, relay.keys, relay.port), allowed={200}, check=first_item_refused)
                continue
            campaign.run("edges", f"POST {seed.path} idempotency key {value[:12]!r}",
                         bodies.encode(seed, relay.keys, relay.port, extra_headers=[("Idempotency-Key", value)]),
                         allowed={400}, check=no_send)
        if name != "batch":
            seed = seed_named(rng, name)
            campaign.run("edges", f"POST {seed.path} two Idempotency-Key headers",
                         bodies.encode(seed, relay.keys, relay.port, extra_headers=[("Idempotency-Key", "a"), ("Idempotency-Key", "b")]),
                         allowed={400}, check=no_send)
    campaign.health("edges")


def first_item_refused(result):
    """A batch whose item 0 must be refused as InvalidRequest naming items[0].idempotencyKey."""
    problems = []
    for response in result.responses:
        try:
            first = json.loads(response.body)["results"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            problems.append((verdicts.WRONG_STATUS, f"no results[0] in {response.body[:80]!r}"))
            continue
        error = first.get("error") or {}
        if first.get("ok") is not False or error.get("type") != "InvalidRequest" or "items[0].idempotencyKey" not in error.get("message", ""):
            problems.append((verdicts.WRONG_STATUS, f"item 0 not refused for its key: {json.dumps(first)[:160]}"))
    return problems


def no_send(result):
    return [(verdicts.WRONG_STATUS, f"sent: apns-id {sorted(verdicts.answered_ids(r))}") for r in result.responses
            if 200 <= r.status < 300]
