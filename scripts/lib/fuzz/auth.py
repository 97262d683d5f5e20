"""Sixteen Authorization variants on every route. A wrong, malformed or
missing key is 401 (400 or 431 for a header that is itself malformed), a key
of another app 403; every refusal is a JSON error, never a 5xx, never a
success, and nothing is sent."""

import base64
import hashlib
import random

from . import bodies, verdicts

REFUSED = {401}
MALFORMED = {400, 401}


def variants(right, other, wrong):
    """(name, header values (None: no header), statuses that fit)."""
    return [
        ("missing", [], REFUSED),
        ("empty", [""], REFUSED),
        ("scheme only", ["Bearer"], REFUSED),
        ("scheme and two spaces", ["Bearer  "], REFUSED),
        # RFC 9110 11.1: the scheme is case-insensitive, so the right key may pass.
        ("lowercase scheme", ["bearer " + right], {200, 201, 401}),
        ("wrong key", ["Bearer " + wrong], REFUSED),
        ("key of another app", ["Bearer " + other], {403}),
        ("very long key", ["Bearer " + "k" * 65536], {400, 401, 413, 431}),
        ("NUL inside the key", ["Bearer " + right[:8] + "\x00" + right[8:]], MALFORMED),
        # A NUL read as SP (RFC 9110 5.5) leaves "key junk", not the key; a
        # parser that stops at the NUL would see the right key.
        ("NUL and more after the key", ["Bearer " + right + "\x00junk"], MALFORMED),
        ("Basic scheme", ["Basic " + base64.b64encode((right + ":").encode()).decode()], REFUSED),
        ("key plus a character", ["Bearer " + right + "x"], REFUSED),
        ("key minus its last character", ["Bearer " + right[:-1]], REFUSED),
        ("the key's SHA-256", ["Bearer " + hashlib.sha256(right.encode()).hexdigest()], REFUSED),
        ("two credentials in one header", ["Bearer " + right + ", Bearer " + wrong], MALFORMED),
        ("non-ASCII in the key", ["Bearer " + right + "é"], REFUSED),
    ]


def success(response):
    return 200 <= response.status < 300


def batch_all_forbidden(response):
    """A batch authenticates the request and scopes each item: a key of another
    app gets 200 with every item refused as Forbidden, none sent."""
    document = verdicts.parse_json(response.body) or {}
    results = document.get("results") or []
    bad = [r for r in results if r.get("ok") or (r.get("error") or {}).get("type") != "Forbidden"]
    return not results or bad


def run(campaign):
    relay = campaign.relay
    rng = random.Random(0)
    wrong = "fuzz-wrong-" + "0" * 32
    routes = {}
    for seed in bodies.seeds(rng):
        routes.setdefault((seed.method, "device" if seed.path.startswith("/3/") else tuple(seed.path.split("/")[1:3])), seed)
    for seed in routes.values():
        if seed.name == "device":  # name the app, so another app's key cannot pick its own
            seed.headers.append(("apns-relay-app", "checkout-ios"))
        right = relay.keys[seed.key]
        other = relay.keys["other"] if seed.key != "other" else relay.keys["backend"]
        works = {404} if seed.name == "channel-delete" else {200, 201}  # the mock knows no such channel
        for name, values, allowed in variants(right, other, wrong):
            allowed = set(allowed)
            if name == "lowercase scheme":
                allowed = works | {401}
            if name == "key of another app":
                if seed.name == "batch":
                    allowed = {200}
                elif seed.name == "admin-get":
                    allowed = {200}  # any key may read the switch
            fresh = bodies.clone(seed)
            if fresh.sends:  # a new token, so a send that slips through is its own apns-id
                fresh = next(s for s in bodies.seeds(rng) if s.name == seed.name)
                if fresh.name == "device":
                    fresh.headers.append(("apns-relay-app", "checkout-ios"))
            headers = [("Authorization", value) for value in values]
            data = bodies.encode(fresh, relay.keys, relay.port, extra_headers=headers, authorization=False)

            def check(result, name=name, seed=seed, allowed=allowed):
                problems = []
                for response in result.responses:
                    if name == "key of another app" and seed.name == "batch" and batch_all_forbidden(response):
                        problems.append((verdicts.ACCEPTED_BAD_KEY, f"batch items not all Forbidden: {response.body[:200]!r}"))
                    elif name != "lowercase scheme" and not (name == "key of another app" and seed.name in ("batch", "admin-get")) \
                            and (success(response) or verdicts.answered_ids(response)):
                        problems.append((verdicts.ACCEPTED_BAD_KEY, f"{response.status} {response.body[:120]!r}"))
                    elif response.status not in allowed:
                        problems.append((verdicts.WRONG_STATUS, f"{response.status} not in {sorted(allowed)}: {response.body[:120]!r}"))
                return problems

            campaign.run("auth", f"{seed.method} {seed.path[:40]} with {name}", data, method=seed.method,
                         check=check, close_ok=name == "very long key")
        # The right key on the same route works (so the refusals above are about the key).
        fresh = next(s for s in bodies.seeds(rng) if s.name == seed.name)
        if fresh.name == "device":
            fresh.headers.append(("apns-relay-app", "checkout-ios"))
        campaign.run("auth", f"{seed.method} {seed.path[:40]} with the right key",
                     bodies.encode(fresh, relay.keys, relay.port), method=seed.method,
                     allowed=works)
    campaign.health("auth")
