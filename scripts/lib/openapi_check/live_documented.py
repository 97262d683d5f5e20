"""(d) The documentation's own request examples, sent as written (app,
environment and channel id swapped for this relay's): each must get the
status the documentation shows, and a batch the guide's per-item outcome."""

import json
import pathlib
import re
import urllib.parse

from .examples import guide_examples, spec_examples

REQUEST_ROUTES = {"/components/schemas/SendRequest": "/v1/send", "/components/schemas/BatchRequest": "/v1/send/batch"}


def documented_examples(ctx):
    """Every request example in the guide and the spec, sent; the status must be the documented one."""
    channel = None
    created = ctx.call("[d] POST /v1/channels (a channel for the documented broadcast)", "/v1/channels", "POST",
                       key=ctx.args.api_key, body=ctx.send_fields(storagePolicy="no-storage"), expect=201)
    if created is not None and isinstance(created.json, dict):
        channel = created.json.get("channelId")
    guide = list(guide_examples(ctx.args.guide)) if ctx.args.guide and pathlib.Path(ctx.args.guide).exists() else []
    sent = 0
    for position, (line, pointer, text) in enumerate(guide):
        route = REQUEST_ROUTES.get(pointer)
        if route is None:
            continue
        body = json.loads(text)
        sent += 1
        send_documented(ctx, f"[d] {ctx.args.guide} line {line}: {route}", route, body, channel,
                        shown_answer(guide, position) if route.endswith("batch") else None)
    for pointer, schema_pointer, value in spec_examples(ctx.spec):
        match = re.match(r"^/paths/([^/]+)/post/requestBody/", pointer)
        if not match or not isinstance(value, dict):
            continue
        route = match.group(1).replace("~1", "/").replace("~0", "~")
        if route not in ("/v1/send", "/v1/send/batch", "/v1/describe"):
            continue
        sent += 1
        send_documented(ctx, f"[d] spec {pointer}", route, value, channel, None)
    if sent == 0:
        ctx.checks.record("[d] the documentation has request examples", ["none found"])
    if channel:
        ctx.call("[d] DELETE /v1/channels/{channelId} (clean up)", f"/v1/channels/{urllib.parse.quote(channel, safe='')}",
                 "DELETE", template="/v1/channels/{channelId}", key=ctx.args.api_key,
                 query={"app": ctx.args.app, "environment": ctx.args.environment}, expect=200)


def shown_answer(guide, position):
    """The BatchResponse the guide shows for the batch example at `position`:
    the first one after it, before the next request example; None without one."""
    for _, pointer, text in guide[position + 1:]:
        if pointer in REQUEST_ROUTES:
            return None
        if pointer == "/components/schemas/BatchResponse":
            return json.loads(text)
    return None


def send_documented(ctx, name, route, body, channel, answer):
    if "items" in body:
        body = dict(body, items=[localized(ctx, item, channel) for item in body["items"]])
    else:
        body = localized(ctx, body, channel)

    def check(response):
        if answer is None or response.status != 200 or not isinstance(response.json, dict):
            return []
        got = [(r.get("ok"), (r.get("error") or {}).get("reason")) for r in response.json.get("results") or []]
        shown = [(r.get("ok"), (r.get("error") or {}).get("reason")) for r in answer.get("results") or []]
        problems = [] if got == shown else [f"results (ok, reason) {got}, the guide shows {shown}"]
        if response.json.get("summary") != answer.get("summary"):
            problems.append(f"summary {response.json.get('summary')}, the guide shows {answer.get('summary')}")
        return problems

    # A send example documents a successful send (an answer of 200); with
    # --expect-success the relay must give exactly that.
    ctx.call(name, route, "POST", key=ctx.args.api_key, body=body,
             expect=[200] if ctx.args.expect_success else None, check=check)


def localized(ctx, item, channel):
    """A documented send made sendable here: this relay's app, environment and channel."""
    item = dict(item)
    item["app"] = ctx.args.app
    item["environment"] = ctx.args.environment
    if "channelId" in item and channel:
        item["channelId"] = channel
    return item
