"""Does a response match what its operation documents? Status, headers,
body schema, the traceparent continuing the caller's trace, and the
x-error-types pairing of an error type with its status and headers."""

import re

from .spec import escape_pointer

TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def conformance(spec, op_pointer, response, response_pointer=None):
    """Problems with response against the operation at op_pointer (or a components response)."""
    problems = []
    if response_pointer is None:
        responses = spec.at(op_pointer)["responses"]
        key = str(response.status)
        if key not in responses:
            key = f"{response.status // 100}XX" if f"{response.status // 100}XX" in responses else "default"
        if key not in responses:
            return [f"status {response.status} is not documented (documented: {', '.join(responses)})"]
        documented, pointer = spec.deref(responses[key], f"{op_pointer}/responses/{escape_pointer(key)}")
    else:
        documented, pointer = spec.deref(spec.at(response_pointer), response_pointer)

    for name, header in (documented.get("headers") or {}).items():
        header, header_pointer = spec.deref(header, f"{pointer}/headers/{escape_pointer(name)}")
        value = response.headers.get(name.lower())
        if value is None:
            if header.get("required") and name.lower() != "traceparent":  # traceparent() reports it
                problems.append(f"header {name} missing")
            continue
        if "schema" in header:
            for problem in spec.errors(f"{header_pointer}/schema", value):
                problems.append(f"header {name}: {problem}")

    content = documented.get("content")
    if not content:
        if response.body.strip():
            problems.append(f"body should be empty, got {response.body[:80]!r}")
    else:
        media = response.media_type
        if media not in content:
            problems.append(f"content-type {media or '(none)'} is not one of {', '.join(content)}")
        else:
            schema_pointer = f"{pointer}/content/{escape_pointer(media)}/schema"
            if media == "application/json" or media.endswith("+json"):
                if response.json_error or not response.body:
                    problems.append(f"body is not JSON: {response.json_error or 'empty'}")
                else:
                    problems.extend(spec.errors(schema_pointer, response.json))
            else:
                problems.extend(spec.errors(schema_pointer, response.body.decode("utf-8", "replace")))

    tp = (documented.get("headers") or {}).get("traceparent")
    tp_required = bool(tp) and spec.deref(tp, f"{pointer}/headers/traceparent")[0].get("required", False)
    problems.extend(traceparent_problems(response, required=tp_required))
    problems.extend(error_semantics(spec, response))
    return problems


def traceparent_problems(response, required=True):
    value = response.headers.get("traceparent")
    if value is None:
        return ["traceparent missing (the spec requires it on this response)"] if required else []
    match = TRACEPARENT.match(value)
    if not match:
        return [f"traceparent {value!r} is not W3C format"]
    if response.sent_traceparent:
        sent = TRACEPARENT.match(response.sent_traceparent)
        if match.group(2) != sent.group(2):
            return [f"traceparent trace-id {match.group(2)} does not continue the incoming {sent.group(2)}"]
        if match.group(3) == sent.group(3):
            return ["traceparent parent-id is the caller's span, not the relay's"]
    return []


def error_semantics(spec, response):
    """For relay error bodies: the type's status and headers from x-error-types."""
    if response.status < 400 or not isinstance(response.json, dict):
        return []
    error = response.json.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        return []
    problems = []
    rule = spec.error_types.get(error["type"])
    if rule is None:
        return []  # an undeclared type is only valid where the schema allows any type
    if response.status not in rule["status"]:
        problems.append(f"error type {error['type']} comes with {rule['status']}, not {response.status}")
    for header in rule.get("headers", []):
        if header not in response.headers:
            problems.append(f"error type {error['type']} must carry header {header}")
    if "status" in error and error["status"] != response.status:
        problems.append(f"error.status {error['status']} differs from the HTTP status {response.status}")
    return problems


def error_of(response):
    if isinstance(response.json, dict) and isinstance(response.json.get("error"), dict):
        return response.json["error"]
    return {}


def expect_error(response, status, types, field=None):
    """Problems unless response is `status` with an error body whose type is in types (and field matches)."""
    problems = []
    statuses = status if isinstance(status, (list, tuple, set)) else [status]
    if response.status not in statuses:
        problems.append(f"expected status {'/'.join(map(str, statuses))}, got {response.status}")
    error = error_of(response)
    if error.get("type") not in types:
        problems.append(f"expected error type {'/'.join(types)}, got {error.get('type')!r}")
    if field is not None:
        got = error.get("field")
        if not isinstance(got, str) or not (got == field or got.endswith("." + field)):
            problems.append(f"expected field {field!r}, got {got!r}")
    return problems


# --------------------------------------------------------------------------- the run
