"""(c) A handful of bad requests: each must be refused with the documented
status, error type and (where it names one) field."""

import json
import secrets

from .conformance import conformance, error_of, expect_error

SEND = ("/v1/send", "POST")


def invalid(ctx):
    authentication(ctx)
    bad_bodies(ctx)
    bad_snapshots(ctx)
    bad_queries(ctx)
    admin_forbidden(ctx)
    apns_device_unauthenticated(ctx)
    oversized(ctx)


def bad(ctx, name, route, status, types, field=None, **kwargs):
    """A request that must be refused with `status` and an error of one of `types` (naming `field`)."""
    ctx.call(name, *route, check=lambda r: expect_error(r, status, types, field), **kwargs)


def authentication(ctx):
    bad(ctx, "[c] no Authorization -> 401", SEND, 401, ["Unauthorized"], body=ctx.alert())
    bad(ctx, "[c] unknown API key -> 401", SEND, 401, ["Unauthorized"], body=ctx.alert(),
        key="wrong-" + secrets.token_hex(8))


def bad_bodies(ctx):
    key = ctx.args.api_key
    bad(ctx, "[c] malformed JSON -> 400", SEND, 400, ["InvalidRequest"], key=key, raw=b'{"app": "x",')
    bad(ctx, "[c] unknown field -> 400 naming it", SEND, 400, ["InvalidRequest"], "bogusField", key=key,
        body=ctx.alert(bogusField=1))
    bad(ctx, "[c] wrong type (priority \"10\") -> 400 naming it", SEND, 400, ["InvalidRequest"], "priority", key=key,
        body=ctx.alert(priority="10"))
    missing = ctx.alert()
    del missing["operation"]
    bad(ctx, "[c] missing field (operation) -> 400 naming it", SEND, 400, ["InvalidRequest"], "operation", key=key,
        body=missing)

    def unknown_app(response):
        if response.status == 403:
            return expect_error(response, 403, ["Forbidden"])
        return expect_error(response, 404, ["NotFound"], "app")

    ctx.call("[c] unknown app -> 404 field app (403 for a scoped key)", *SEND, key=key,
             body=ctx.alert(app="no-such-app-" + secrets.token_hex(4)), check=unknown_app)


def bad_snapshots(ctx):
    key = ctx.args.api_key
    broken = json.loads(json.dumps(ctx.snapshot))
    kind = broken.get("kind")
    if isinstance(broken.get(kind), dict) and "progress" in broken[kind]:
        broken[kind]["progress"] = 2
        field = "progress"
    else:
        broken["schemaVersion"] = "4"
        field = "schemaVersion"
    bad(ctx, f"[c] invalid snapshot ({field}) -> 400 InvalidSnapshot", SEND, 400, ["InvalidSnapshot"], None, key=key,
        body=ctx.alert(snapshot=broken))
    ctx.call(f"[c] invalid snapshot names the path of {field}", "/v1/describe", "POST", key=key,
             body=ctx.alert(snapshot=broken),
             check=lambda r: [] if field in str(error_of(r).get("field", "")) else [
                 f"field {error_of(r).get('field')!r} does not name {field}"])

    other = "notification" if kind != "notification" else "update"
    mismatch = ctx.send_fields(operation=other, token=ctx.token, snapshot=ctx.snapshot)
    ctx.call(f"[c] {kind} snapshot for {other} -> 400 InvalidSnapshot MS008", "/v1/describe", "POST", key=key,
             body=mismatch,
             check=lambda r: expect_error(r, 400, ["InvalidSnapshot"]) + (
                 [] if error_of(r).get("trapId") == "MS008" else [f"trapId {error_of(r).get('trapId')!r}, not MS008"]))


def bad_queries(ctx):
    key = ctx.args.api_key
    bad(ctx, "[c] batch with no items -> 400", ("/v1/send/batch", "POST"), 400, ["InvalidRequest"], key=key,
        body={"items": []})
    bad(ctx, "[c] dead-tokens since=yesterday -> 400 naming since", ("/v1/dead-tokens", "GET"), 400,
        ["InvalidRequest"], "since", key=key, query={"app": ctx.args.app, "since": "yesterday"})
    bad(ctx, "[c] dead-tokens limit=0 -> 400 naming limit", ("/v1/dead-tokens", "GET"), 400,
        ["InvalidRequest"], "limit", key=key, query={"app": ctx.args.app, "since": "1h", "limit": 0})


def admin_forbidden(ctx):
    if ctx.args.api_key == ctx.args.admin_key:
        ctx.checks.skip("[c] non-admin key PUT /v1/admin/retry -> 403", "--api-key is the admin key")
        return

    def forbidden(response):
        if response.status == 200:
            return ["a non-admin key changed the kill switch (or --api-key is an admin key)"]
        return expect_error(response, 403, ["Forbidden"])

    ctx.call("[c] non-admin key PUT /v1/admin/retry -> 403", "/v1/admin/retry", "PUT", key=ctx.args.api_key,
             body={"disabled": False}, check=forbidden)


def apns_device_unauthenticated(ctx):
    ctx.call("[c] /3/device without Authorization -> 401", f"/3/device/{ctx.token}", "POST",
             template="/3/device/{token}", body={"aps": {"alert": "x"}},
             headers={"apns-push-type": "alert"}, check=lambda r: [] if r.status == 401 else [
                 f"expected 401, got {r.status}"])


def oversized(ctx):
    """A body one byte over --max-body-bytes, on a raw socket: 413 PayloadTooLarge."""
    if not ctx.args.max_body_bytes:
        ctx.checks.skip("[c] oversized body -> 413", "no --max-body-bytes given")
        return
    name = f"[c] body of {ctx.args.max_body_bytes + 1} bytes -> 413"
    try:
        response = ctx.client.oversized("POST", "/v1/send", ctx.args.api_key, ctx.args.max_body_bytes + 1)
    except OSError as error:
        ctx.checks.record(name, [f"request failed: {error}"])
        return
    problems = conformance(ctx.spec, ctx.op(*SEND), response)
    problems.extend(expect_error(response, 413, ["PayloadTooLarge"]))
    ctx.checks.record(name, problems, response.summary())
