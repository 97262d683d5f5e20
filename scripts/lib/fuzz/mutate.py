"""Mutations of a valid request, drawn from a seeded random.Random so a run
is reproduced by its seed: values of the wrong type, numbers at and past
every limit, long and odd strings (unicode, NUL, CR, LF), deleted,
duplicated and unknown fields, deep nesting, and broken JSON text. Each
returns a short description for the reproducer line."""

import json
import re

from .bodies import clone

HUGE_NUMBERS = [2**31, 2**31 - 1, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -1, 0,
                1e308, -1e308, 1.5, -0.0, 5e-324, 99999999999999999999999999999999999999]
RAW_NUMBERS = ["1e999999", "-1e999999", "NaN", "Infinity", "-Infinity", "1" * 400, "0x10", "01", "1.", ".5", "+1", "1e-999999"]
ODD_STRINGS = [
    "", " ", "\x00", "a\x00b", "\r\n", "line\nbreak", "\r", "\t", "\x1b[31m", "\x7f", "\u202e", "é", "\u0301",
    "🙂" * 50, "\ufeff", "\uffff", "null", "true", "0", "-1", "../../etc/passwd", "%00", "%0d%0a", "<script>",
    "' OR 1=1 --", "\\", '"', "${jndi:x}", "A" * 70, "Z" * 5000,
]
DEEP = 3000


def paths(value, prefix=()):
    """Every path (tuple of keys and indices) into a JSON value, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, prefix + (index,))
    return found


def get(value, path):
    for step in path:
        value = value[step]
    return value


def put(value, path, new):
    if not path:
        return new
    get(value, path[:-1])[path[-1]] = new
    return value


def label(path):
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def nested(depth, kind):
    return ("[" * depth + "]" * depth) if kind == "array" else ('{"a":' * depth + "1" + "}" * depth)


# ---------------------------------------------------------------- tree mutations (the body stays JSON)


def flip_type(rng, body, path):
    current = get(body, path)
    choices = [None, True, 0, 1.5, "x", [], {}, [current], {"value": current}, str(current)]
    new = rng.choice([c for c in choices if type(c) is not type(current)] or choices)
    return put(body, path, new), f"{label(path)} ← {json.dumps(new)[:40]}"


def huge_number(rng, body, path):
    new = rng.choice(HUGE_NUMBERS)
    return put(body, path, new), f"{label(path)} ← {new!r}"


def long_string(rng, body, path):
    size = rng.choice([65, 257, 4097, 40000, 70000])
    new = rng.choice("xé🙂\u0000") * size
    return put(body, path, new), f"{label(path)} ← string of {size}"


def odd_string(rng, body, path):
    current = get(body, path)
    odd = rng.choice(ODD_STRINGS)
    if isinstance(current, str) and rng.random() < 0.5:
        cut = rng.randrange(len(current) + 1)
        new = current[:cut] + odd + current[cut:]
    else:
        new = odd
    return put(body, path, new), f"{label(path)} ← {json.dumps(new)[:50]}"


def delete_field(rng, body, path):
    if not path:
        return {}, "body ← {}"
    parent = get(body, path[:-1])
    del parent[path[-1]]
    return body, f"delete {label(path)}"


def unknown_field(rng, body, path):
    target = get(body, path)
    if not isinstance(target, dict):
        return flip_type(rng, body, path)
    name = rng.choice(["prority", "extra", "__proto__", "", "app ", "APP", "\u0000", "a" * 300])
    target[name] = rng.choice([1, "x", None, {}])
    return body, f"{label(path)} + unknown field {name[:20]!r}"


def deep_value(rng, body, path):
    # A marker the encoder replaces with the nested text (Python's own
    # encoder would overflow its stack at these depths).
    depth = rng.choice([64, 512, DEEP])
    kind = rng.choice(["array", "object"])
    return put(body, path, f"@@deep-{kind}-{depth}@@"), f"{label(path)} ← {kind} nesting {depth}"


def grow_array(rng, body, path):
    target = get(body, path)
    if not isinstance(target, list) or not target:
        return huge_number(rng, body, path)
    count = rng.choice([1001, 5000])
    return put(body, path, [target[0]] * count), f"{label(path)} × {count}"


TREE = [flip_type, huge_number, long_string, odd_string, delete_field, unknown_field, deep_value, grow_array]


DEEP_MARKER = re.compile(rb'"@@deep-(array|object)-([0-9]+)@@"')


def encode(body, ascii_only=True):
    text = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    return DEEP_MARKER.sub(lambda match: nested(int(match.group(2)), match.group(1).decode()).encode(), text)


# ---------------------------------------------------------------- text mutations (the body is broken on purpose)


def duplicate_key(rng, text, body):
    if not isinstance(body, dict) or not body:
        return text + b"}", "trailing brace"
    key = rng.choice(list(body))
    twin = json.dumps({key: rng.choice([None, 1, "other", body[key]])})[1:-1]
    return text[:-1] + b"," + twin.encode() + b"}", f"duplicate key {key!r}"


def raw_number(rng, text, body):
    """A value JSON has no number for (NaN, 1e999999, 400 digits, 0x10) in place of a leaf."""
    number = rng.choice(RAW_NUMBERS)
    if not isinstance(body, (dict, list)):
        return number.encode(), "bare " + number[:20]
    body = json.loads(text)
    path = rng.choice(paths(body)[1:] or [()])
    sentinel = "@@raw-number@@"
    body = put(body, path, sentinel)
    return json.dumps(body).encode().replace(b'"' + sentinel.encode() + b'"', number.encode()), f"{label(path)} ← {number[:20]}"


def invalid_utf8(rng, text, body):
    bad = rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"])
    spot = text.find(b'"', 2) + 1 or 1
    return text[:spot] + bad + text[spot:], f"invalid UTF-8 {bad!r}"


def lone_surrogate(rng, text, body):
    spot = text.find(b'"', 2) + 1 or 1
    escape = rng.choice([b"\\ud800", b"\\udfff", b"\\u0000", b"\\uZZZZ", b"\\x41", b"\\"])
    return text[:spot] + escape + text[spot:], f"escape {escape.decode()}"


def truncate(rng, text, body):
    cut = rng.randrange(len(text)) if text else 0
    return text[:cut], f"truncated at {cut}"


def garbage(rng, text, body):
    extra = rng.choice([b"}", b",", b" x", b"\x00", b"{}", b"\n{}\n", b"//c", b"/*c*/"])
    return (text + extra if rng.random() < 0.7 else extra + text), f"garbage {extra!r}"


def wrapper(rng, text, body):
    choice = rng.choice(["bom", "empty", "spaces", "null", "array", "string", "deep-array", "deep-object"])
    texts = {"bom": b"\xef\xbb\xbf" + text, "empty": b"", "spaces": b" \n\t ", "null": b"null", "array": b"[" + text + b"]",
             "string": json.dumps(text.decode("utf-8", "replace")).encode(), "deep-array": nested(DEEP * 10, "array").encode(),
             "deep-object": nested(DEEP * 10, "object").encode()}
    return texts[choice], f"body ← {choice}"


TEXT = [duplicate_key, raw_number, invalid_utf8, lone_surrogate, truncate, garbage, wrapper]


# ---------------------------------------------------------------- around the body


def header_mutation(rng, seed):
    """A header of the request (content-type, an apns-* header of /3/device) made odd."""
    choice = "query" if seed.query and rng.random() < 0.6 else rng.choice(["content-type", "apns", "traceparent", "idempotency-key"])
    if choice == "content-type":
        value = rng.choice(["text/plain", "application/json; charset=latin-1", "application/jsonx", "", "application/json\x00",
                            "multipart/form-data; boundary=x", "APPLICATION/JSON"])
        return None, [], value, f"content-type {value!r}"
    if choice == "traceparent":
        value = rng.choice(["00-" + "0" * 32 + "-" + "0" * 16 + "-01", "zz", "00-" + "a" * 500, "\x00"])
        return None, [("traceparent", value)], "application/json", f"traceparent {value[:20]!r}"
    if choice == "idempotency-key":
        # Keys are hashed into the audit row and the shared key table: odd
        # bytes, limits, and a key repeated with another body (422, no row).
        value = rng.choice(["", " ", "k" * 255, "k" * 256, "a\x00b", "a\rb", "a\nb", "\x7f", "é", "key 1", "fuzz-repeat",
                            "'; drop table apns_idempotency_keys; --", "\\N", "a\tb"])
        return seed, [("Idempotency-Key", value)], "application/json", f"Idempotency-Key {value[:20]!r}"
    if choice == "query" and seed.query:
        name = rng.choice(list(seed.query))
        value = rng.choice(["", "-1", "0", "99999999999999999999", "1e308", "9223372036854775807d", "9223372036854775808s",
                            "1" * 40 + "h", "%00", "\x00", "2026-13-45T99:99:99Z", "2026-11-22T00:00:00+99:99", "7d\n",
                            "é", "a" * 5000, "1h&app=x", "NaN", "P1D"])
        seed.query[name] = value
        return seed, [], "application/json", f"query {name}={value[:30]!r}"
    header = rng.choice(["apns-push-type", "apns-priority", "apns-expiration", "apns-topic", "apns-collapse-id", "apns-id",
                         "apns-relay-app", "apns-relay-environment"])
    value = rng.choice(["", "-1", "99999999999999999999", "1e308", "x" * 100, "voip", "\x01", "é", "0", "10",
                        "00000000-0000-0000-0000-000000000000", "nope"])
    return seed, [(header, value)], "application/json", f"header {header}: {value[:20]!r}"


def mutate(rng, seed):
    """(seed, raw_body or None, extra headers, content type, description) for one case."""
    seed = clone(seed)
    roll = rng.random()
    if roll < 0.15 or seed.body is None:
        changed, headers, content_type, description = header_mutation(rng, seed)
        if changed is not None or seed.body is None:
            return (changed or seed), None, headers, content_type if seed.body is not None else None, description
        return seed, None, headers, content_type, description
    if roll < 0.70:
        operator = rng.choice(TREE)
        path = rng.choice(paths(seed.body))
        seed.body, description = operator(rng, seed.body, path)
        if rng.random() < 0.25:  # sometimes two at once
            path = rng.choice(paths(seed.body))
            seed.body, more = rng.choice(TREE)(rng, seed.body, path)
            description += "; " + more
        return seed, encode(seed.body, ascii_only=rng.random() < 0.5), [], "application/json", description
    operator = rng.choice(TEXT)
    text = json.dumps(seed.body).encode()
    raw, description = operator(rng, text, seed.body)
    return seed, raw, [], "application/json", description
