"""(b) One valid request per operation, each answer checked against its
operation and for what the route promises (ids echoed, results counted,
the channel listed, the kill switch set)."""

import json
import re
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone

from .conformance import error_of

JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.")


def valid(ctx):
    ctx.call("[b] GET /healthz", "/healthz", "GET", expect=200, client=ctx.health)
    ctx.call("[b] GET /readyz", "/readyz", "GET", client=ctx.health)
    describe(ctx)
    send(ctx)
    batch(ctx)
    channels(ctx)
    dead_tokens(ctx)
    admin(ctx)
    apns_device(ctx)
    apns_device_as_curl_posts(ctx)
    dead_tokens_default_since(ctx)


def describe(ctx):
    def check(response):
        problems = []
        if response.status != 200 or not isinstance(response.json, dict):
            return problems
        body = response.json
        if not str(body.get("url", "")).endswith(f"/3/device/{ctx.token}"):
            problems.append(f"url {body.get('url')!r} does not end in /3/device/<token>")
        headers = body.get("headers") or {}
        if headers.get("apns-push-type") != "alert":
            problems.append(f"apns-push-type is {headers.get('apns-push-type')!r}, not alert")
        if JWT.search(json.dumps(body)):
            problems.append("the description contains something shaped like a JWT")
        if body.get("payload") is not None and not body.get("payloadBytes"):
            problems.append("payloadBytes is 0 with a payload")
        if "apns-id" in response.headers:
            problems.append("apns-id header on a route that sent nothing")
        return problems

    ctx.call("[b] POST /v1/describe (alert)", "/v1/describe", "POST", key=ctx.args.api_key,
             body=ctx.alert(), expect=200, check=check)


def send(ctx):
    apns_id = str(uuid.uuid4())

    def check(response):
        problems = []
        body = response.json if isinstance(response.json, dict) else {}
        if response.status == 200:
            if body.get("apnsId") != apns_id:
                problems.append(f"apnsId {body.get('apnsId')!r} is not the one sent ({apns_id})")
            if response.headers.get("apns-id") != body.get("apnsId"):
                problems.append("apns-id header differs from body apnsId")
            if body.get("status") != 200:
                problems.append(f"status in body is {body.get('status')}, not 200")
            if "attempts" in body and body.get("retried") != (body["attempts"] > 1):
                problems.append("retried does not match attempts > 1")
        else:
            error = error_of(response)
            if "apnsId" in error and error["apnsId"] != apns_id:
                problems.append(f"error.apnsId {error['apnsId']} is not the one sent")
        return problems

    ctx.call("[b] POST /v1/send (alert)", "/v1/send", "POST", key=ctx.args.api_key,
             body=ctx.alert(apnsId=apns_id), expect=ctx.success_or_documented(), check=check)


def batch(ctx):
    items = [ctx.alert(), ctx.send_fields(operation="background", token="not-a-hex-token")]

    def check(response):
        problems = []
        if response.status != 200 or not isinstance(response.json, dict):
            return problems
        results = response.json.get("results") or []
        summary = response.json.get("summary") or {}
        if len(results) != 2:
            problems.append(f"{len(results)} results for 2 single-token items")
        by_item = {r.get("item"): r for r in results if isinstance(r, dict)}
        if set(by_item) != {0, 1}:
            problems.append(f"results name items {sorted(map(str, by_item))}, not 0 and 1")
        if by_item.get(1, {}).get("ok") is not False:
            problems.append("item 1 (bad token) is not ok:false")
        if ctx.args.expect_success and by_item.get(0, {}).get("ok") is not True:
            problems.append(f"item 0 failed: {by_item.get(0, {}).get('error')}")
        succeeded = sum(1 for r in results if r.get("ok") is True)
        if summary != {"total": len(results), "succeeded": succeeded, "failed": len(results) - succeeded}:
            problems.append(f"summary {summary} does not count the results")
        return problems

    ctx.call("[b] POST /v1/send/batch (2 items, item 1 bad)", "/v1/send/batch", "POST",
             key=ctx.args.api_key, body={"items": items}, expect=200, check=check)


def channels(ctx):
    query = {"app": ctx.args.app, "environment": ctx.args.environment}
    created = ctx.call(
        "[b] POST /v1/channels", "/v1/channels", "POST", key=ctx.args.api_key,
        body=ctx.send_fields(storagePolicy="no-storage"),
        expect=[201] if ctx.args.expect_success else None,
        check=lambda r: ([] if r.status != 201 or r.headers.get("apns-id") == (r.json or {}).get("apnsId")
                         else ["apns-id header differs from body apnsId"]))
    channel = (created.json or {}).get("channelId") if created is not None and created.status == 201 else None

    def listed(response):
        if not channel or response.status != 200 or not ctx.args.expect_success:
            return []
        if channel not in (response.json or {}).get("channels", []):
            return [f"the channel just created ({channel}) is not listed"]
        return []

    ctx.call("[b] GET /v1/channels", "/v1/channels", "GET", key=ctx.args.api_key, query=query,
             expect=ctx.success_or_documented(), check=listed)

    if channel is None:
        ctx.checks.skip("[b] GET /v1/channels/{channelId}", "no channel was created")
        ctx.checks.skip("[b] DELETE /v1/channels/{channelId}", "no channel was created")
        return

    def read(response):
        if response.status != 200 or not ctx.args.expect_success:
            return []
        body = response.json or {}
        problems = []
        if body.get("channelId") != channel:
            problems.append(f"channelId {body.get('channelId')}, not the channel read ({channel})")
        if body.get("storagePolicy") != "no-storage":
            problems.append(f"storagePolicy {body.get('storagePolicy')}, not the no-storage it was created with")
        return problems

    ctx.call("[b] GET /v1/channels/{channelId}", f"/v1/channels/{urllib.parse.quote(channel, safe='')}",
             "GET", template="/v1/channels/{channelId}", key=ctx.args.api_key, query=query,
             expect=ctx.success_or_documented(), check=read)

    def deleted(response):
        if response.status == 200 and (response.json or {}).get("status") != 204:
            return [f"body status {(response.json or {}).get('status')}, not APNs' 204"]
        return []

    ctx.call("[b] DELETE /v1/channels/{channelId}", f"/v1/channels/{urllib.parse.quote(channel, safe='')}",
             "DELETE", template="/v1/channels/{channelId}", key=ctx.args.api_key, query=query,
             expect=ctx.success_or_documented(), check=deleted)


def dead_tokens(ctx):
    def within(limit, environment=None):
        def check(response):
            if response.status != 200 or not isinstance(response.json, dict):
                return []
            rows = response.json.get("deadTokens") or []
            problems = []
            if len(rows) > limit:
                problems.append(f"{len(rows)} rows, more than limit {limit}")
            horizon = datetime.now(timezone.utc) - timedelta(hours=1, minutes=5)
            for row in rows:
                try:
                    last = datetime.fromisoformat(str(row.get("lastSeen")).replace("Z", "+00:00"))
                    if last < horizon:
                        problems.append(f"lastSeen {row.get('lastSeen')} is older than since=1h")
                except ValueError:
                    pass  # the schema check reports a bad date-time
                if environment and row.get("environment") != environment:
                    problems.append(f"row of environment {row.get('environment')} despite environment={environment}")
            return problems[:5]
        return check

    ctx.call("[b] GET /v1/dead-tokens?since=1h", "/v1/dead-tokens", "GET", key=ctx.args.api_key,
             query={"app": ctx.args.app, "since": "1h"}, expect=[200, 503], check=within(1000))
    ctx.call("[b] GET /v1/dead-tokens?since=1h&environment&limit=1", "/v1/dead-tokens", "GET",
             key=ctx.args.api_key, expect=[200, 503],
             query={"app": ctx.args.app, "since": "1h", "environment": ctx.args.environment, "limit": 1},
             check=within(1, ctx.args.environment))


def admin(ctx):
    state = ctx.call("[b] GET /v1/admin/retry", "/v1/admin/retry", "GET", key=ctx.args.admin_key, expect=200)
    forced = state is not None and isinstance(state.json, dict) and state.json.get("source") == "environment"

    def enabled(response):
        body = response.json if isinstance(response.json, dict) else {}
        if response.status == 200 and body.get("retriesDisabled") and body.get("source") == "runtime":
            return ["retries still disabled at runtime after disabled=false"]
        return []

    if ctx.args.exercise_kill_switch:
        def disabled(response):
            body = response.json if isinstance(response.json, dict) else {}
            return [] if response.status != 200 or body.get("retriesDisabled") is True else [
                "retriesDisabled is not true after disabled=true"]

        ctx.call("[b] PUT /v1/admin/retry disabled=true", "/v1/admin/retry", "PUT", key=ctx.args.admin_key,
                 body={"disabled": True}, expect=200, check=disabled)
    ctx.call("[b] PUT /v1/admin/retry disabled=false" + (" (environment forces it: 409)" if forced else ""),
             "/v1/admin/retry", "PUT", key=ctx.args.admin_key, body={"disabled": False},
             expect=409 if forced else 200, check=enabled)


def apns_device(ctx):
    apns_id = str(uuid.uuid4())
    headers = {
        "apns-push-type": "alert",
        "apns-id": apns_id,
        "apns-relay-app": ctx.args.app,
        "apns-relay-environment": ctx.args.environment,
    }
    payload = {"aps": {"alert": {"title": "check-openapi", "body": "APNs-compatible route"}}}

    def check(response):
        if response.status == 200 and response.headers.get("apns-id") != apns_id:
            return [f"apns-id {response.headers.get('apns-id')!r} is not the one sent ({apns_id})"]
        return []

    ctx.call("[b] POST /3/device/{token} (raw APNs payload)", f"/3/device/{ctx.token}", "POST",
             template="/3/device/{token}", key=ctx.args.api_key, body=payload, headers=headers,
             expect=ctx.success_or_documented(), check=check)


def apns_device_as_curl_posts(ctx):
    """The guide's "After" line as curl sends it: `-d` makes the body
    application/x-www-form-urlencoded, and apns-push-type may be left out
    (the relay then sends an alert, as APNs does)."""
    headers = {"content-type": "application/x-www-form-urlencoded", "apns-relay-app": ctx.args.app,
               "apns-relay-environment": ctx.args.environment}
    raw = json.dumps({"aps": {"alert": {"title": "check-openapi", "body": "curl -d"}}}).encode("utf-8")
    ctx.call("[b] POST /3/device/{token} as curl -d posts it, no apns-push-type", f"/3/device/{ctx.token}", "POST",
             template="/3/device/{token}", key=ctx.args.api_key, raw=raw, headers=headers,
             expect=ctx.success_or_documented())


def dead_tokens_default_since(ctx):
    ctx.call("[b] GET /v1/dead-tokens without since (default 24h)", "/v1/dead-tokens", "GET",
             key=ctx.args.api_key, query={"app": ctx.args.app}, expect=[200, 503])
