"""(a) Every documented path and method is served; undocumented paths are
404 and undocumented methods 405 with the documented ones in Allow."""

import http.client
import re
import urllib.parse

from .conformance import conformance, error_of


def routes(ctx):
    for path, method, pointer in ctx.spec.operations():
        operation = ctx.spec.at(pointer)
        key = key_for(ctx, pointer)
        body = {} if "requestBody" in operation else None
        client = ctx.health if key is None else ctx.client
        try:
            response = client.request(method, concrete(ctx, path), key=key, body=body)
        except (OSError, http.client.HTTPException) as error:
            ctx.checks.record(f"[a] {method} {path} is served", [f"request failed: {error}"])
            continue
        problems = []
        error = error_of(response)
        if response.status == 405:
            problems.append("answered 405 Method Not Allowed")
        elif response.status == 404 and error.get("type") == "NotFound" and error.get("field") is None:
            problems.append("answered 404 NotFound (no such route)")
        else:
            problems.extend(conformance(ctx.spec, pointer, response))
        ctx.checks.record(f"[a] {method} {path} is served", problems, response.summary())

    for method, path in (("GET", "/v1/does-not-exist"), ("POST", "/v2/send"), ("GET", "/v1/send/batch/more"),
                         ("GET", "/v1/admin"), ("GET", "/v1/channel")):
        undocumented(ctx, method, path)

    for path in ctx.spec.doc["paths"]:
        documented = ctx.spec.methods(path)
        other = next(m for m in ("GET", "PUT", "DELETE", "PATCH", "POST") if m not in documented)
        not_allowed(ctx, other, path, documented)


def undocumented(ctx, method, path):
    refused(ctx, f"[a] {method} {path} (undocumented) is 404", ctx.client, method, path, ctx.args.api_key,
            404, "/components/responses/RouteNotFound", body={} if method == "POST" else None)


def not_allowed(ctx, method, path, documented):
    def allows_documented(response):
        allow = {m.strip().upper() for m in response.headers.get("allow", "").split(",") if m.strip()}
        return [] if documented <= allow else [f"allow {sorted(allow)} misses {sorted(documented - allow)}"]

    auth = ctx.args.admin_key if "/admin/" in path else ctx.args.api_key
    client = ctx.client if path not in ("/healthz", "/readyz") else ctx.health
    refused(ctx, f"[a] {method} {path} is 405 with allow: {', '.join(sorted(documented))}", client, method,
            concrete(ctx, path), auth, 405, "/components/responses/MethodNotAllowed", check=allows_documented)


def refused(ctx, name, client, method, path, key, status, response_pointer, body=None, check=None):
    """A request the relay must answer with `status` and the components response at response_pointer."""
    try:
        response = client.request(method, path, key=key, body=body)
    except (OSError, http.client.HTTPException) as error:
        ctx.checks.record(name, [f"request failed: {error}"])
        return
    problems = []
    if response.status != status:
        problems.append(f"expected {status}, got {response.status}")
    else:
        problems.extend(conformance(ctx.spec, None, response, response_pointer))
        if check:
            problems.extend(check(response))
    ctx.checks.record(name, problems, response.summary())


def concrete(ctx, path):
    values = {"token": ctx.token, "channelId": urllib.parse.quote("AAAAAAAAAAAAAAAAAAAAAA==", safe="")}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), path)


def key_for(ctx, op_pointer):
    operation = ctx.spec.at(op_pointer)
    security = operation.get("security", ctx.spec.doc.get("security", []))
    if not security:
        return None
    if any("relayAdminKey" in requirement for requirement in security):
        return ctx.args.admin_key
    return ctx.args.api_key
