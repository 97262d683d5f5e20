"""Generates mutations of the reference fixtures and judges each with the
`jsonschema` package (an implementation nobody on this project wrote).

Prints one JSON object per line:
  {"doc": <document>, "valid": <bool>, "paths": [[key, ...], ...] | null, "quirk": <str>?}

- valid: Draft202012Validator + FormatChecker over the contract schema
  (docs/schemas/live-surface-snapshot.schema.json, the path the test passes), after
  stripping a top-level "$schema" string (the relay's one documented
  departure: every reference fixture carries that annotation).
- paths: every location jsonschema reports a problem at, when the doc names
  a known kind (then exactly one oneOf branch applies and its errors are
  unambiguous). "required" is reported at the missing key and
  "additionalProperties" at the unknown key, as the relay reports them.
- quirk: set on cases where jsonschema follows Python's regex dialect rather
  than ECMA-262 (which JSON Schema specifies); the Swift test expects the
  opposite verdict there and says why.

The Swift test feeds every doc to the relay's validator and expects the same
verdict and the same set of paths. Usage:
  python3 differential.py <fixtures-dir> docs/schemas/live-surface-snapshot.schema.json
"""
import copy
import json
import pathlib
import random
import sys

import jsonschema

fixtures_dir, schema_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
schema = json.loads(schema_path.read_text())
checker = jsonschema.FormatChecker()
if "date-time" not in checker.checkers:
    sys.exit("jsonschema cannot check date-time here: pip install rfc3339-validator")
validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
branches = {
    branch["properties"]["kind"]["const"]: jsonschema.Draft202012Validator(branch, format_checker=checker)
    for branch in schema["oneOf"]
}

KINDS = list(branches)
DELETE = object()
WRONG_TYPES = [None, True, 7, 2.5, "text", [], {}]
NUMBERS = [-0.01, 0, 0.0, -0.0, 0.5, 1, 1.0, 1e0, 1.01, 2, 1e20]
INTEGERS = [-1, 0, 3.0, 2.5, 1e2, 1e20, -1e20, 9007199254740991, 9007199254740991.0, 9007199254740992, 9007199254740993]
STRINGS = [
    "", "x", "é" * 20, "é" * 21, "a" * 20, "a" * 21,
    "😀" * 20,          # 20 code points, 40 UTF-16 units: JSON Schema counts code points
    "e\u0301" * 10,     # 20 code points, 10 characters
    "e\u0301" * 11,     # 22 code points, 11 characters
]
DATES = [
    "2026-05-12T18:30:00Z", "2026-05-12T18:30:00.123456Z", "2026-05-12T18:30:00+05:30", "2026-05-12T18:30:00-00:00",
    "2026-05-12T18:30:00+23:59", "2026-05-12T18:30:00-23:59", "2026-05-12T18:30:00+00:60", "2026-05-12T18:30:00+0530",
    "2026-05-12T18:30Z", "2026-05-12T18:30+01:00", "2026-05-12 18:30:00Z", "2026-05-12t18:30:00z", "2026-05-12T18:30:00z",
    "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
    "1600-02-29T00:00:00Z", "1500-02-29T00:00:00Z", "1582-10-10T00:00:00Z", "0001-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z", "0000-02-29T00:00:00Z", "9999-12-31T23:59:59.999999999999Z",
    "2026-04-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z",
    "2026-05-00T00:00:00Z", "2026-05-32T00:00:00Z", "2026-05-12T24:00:00Z", "2026-05-12T23:60:00Z",
    "2026-05-12T23:59:60Z", "2026-05-12T18:30:00+24:00", "2026-05-12T18:30:00", "2026-05-12",
    "2026-05-12T18:30:00.Z", "2026-05-12T18:30:00.5", "26-05-12T18:30:00Z", "2026-5-12T18:30:00Z", "",
    " 2026-05-12T18:30:00Z", "2026-05-12T18:30:00Z ", "\u0662\u0660\u0662\u0666-05-12T18:30:00Z",
]
# Python's `$` also matches before a trailing newline; ECMA-262's does not.
QUIRKY_DATES = ["2026-05-12T18:30:00Z\n"]
LINKS = [
    "a://", "myapp://x", "a1+.-://x", "A://x", "1a://x", "a:/x", "mailto:x", "ab", " a://x",
    "https://example.com/x", "a-b.c+d://", "é://x", "a_b://x", "a://\n",
]
ENUM_WORDS = [
    "prompted", "inProgress", "completing", "systemSmall", "manual", "afterDate", "toggle", "button", "deepLink",
    "accessoryCircular", "accessoryInline", "card", "night", "default", "monochrome", "surface-update",
    "passive", "timeSensitive", "time-sensitive", "critical", "Passive",
]


def strip_annotation(doc):
    if isinstance(doc, dict) and isinstance(doc.get("$schema"), str):
        doc = dict(doc)
        del doc["$schema"]
    return doc


def expected_paths(doc):
    if not isinstance(doc, dict) or doc.get("kind") not in branches:
        return None
    paths = set()
    for error in branches[doc["kind"]].iter_errors(doc):
        where = tuple(str(part) for part in error.absolute_path)
        if error.validator == "required":
            paths.update(where + (key,) for key in error.validator_value if key not in error.instance)
        elif error.validator == "additionalProperties":
            known = error.schema.get("properties", {})
            paths.update(where + (key,) for key in error.instance if key not in known)
        else:
            paths.add(where)
    return sorted(list(path) for path in paths)


def emit(doc, quirk=None):
    judged = strip_annotation(doc)
    line = {"doc": doc, "valid": validator.is_valid(judged), "paths": expected_paths(judged)}
    if quirk:
        line["quirk"] = quirk
    print(json.dumps(line, ensure_ascii=False))


def apply(base, patches):
    """A copy of base with each (path, value) set, or removed for DELETE; None if a path no longer exists."""
    doc = copy.deepcopy(base)
    for path, value in patches:
        parent = doc
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            return None
        if value is DELETE:
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = copy.deepcopy(value)
    return doc


def single_patches(base):
    kind = base["kind"]
    patches = [[((key,), DELETE)] for key in base]
    patches += [[(("schemaVersion",), value)] for value in WRONG_TYPES + ["4", 5, "5", "5 "]]
    for key in ["id", "surfaceId", "state"]:
        patches += [[((key,), value)] for value in WRONG_TYPES + ["", "purple", "bad_timing", "completed", "Active"]]
    patches += [[(("updatedAt",), value)] for value in DATES + [1715538600]]
    patches += [[(("kind",), value)] for value in KINDS + ["bogus", 3, "", "LiveActivity"]]
    patches += [[((extra,), 1)] for extra in ["extra", "$id", "Kind"]]
    # The annotation: accepted at the top as a string, nowhere else.
    patches += [[(("$schema",), "https://example.com/schema.json")], [(("$schema",), 5)], [(("$schema",), None)]]
    patches += [[((kind, "$schema"), "https://example.com/schema.json")]]
    # A second slice, or the slice of another kind in place of this one.
    for other in KINDS:
        if other != kind:
            patches.append([((other,), base[kind])])
            patches.append([((kind,), DELETE), ((other,), base[kind])])
    patches += [[((kind,), value)] for value in WRONG_TYPES]
    for field in list(base[kind]):
        patches.append([((kind, field), DELETE)])
        for value in WRONG_TYPES + NUMBERS + INTEGERS + STRINGS + LINKS + ENUM_WORDS:
            patches.append([((kind, field), value)])
    patches += [[((kind, extra), "x")] for extra in ["unknownField", "primaryText", "subtitle", "family", "Title"]]
    # The optional fields each slice allows, added one at a time.
    for optional, value in [
        ("contextLabel", "c"), ("statusLine", ""), ("actionLabel", ""), ("actionLabel", "Go"), ("estimatedSeconds", 5),
        ("morePartsCount", 0), ("family", "systemLarge"), ("reloadPolicy", "afterDate"), ("state", True),
        ("state", False), ("intent", ""), ("subtitle", "s"), ("category", "other"), ("category", "surface-update"),
        ("threadId", "t"), ("threadId", ""), ("interruptionLevel", "timeSensitive"), ("interruptionLevel", "time-sensitive"),
        ("relevanceScore", 0.3), ("relevanceScore", 1), ("targetContentId", ""), ("targetContentId", "w"),
        ("gaugeValue", 1.5), ("gaugeValue", 0), ("shortText", "é" * 20), ("shortText", ""), ("tint", "monochrome"),
        ("tint", "Monochrome"),
    ]:
        patches.append([((kind, optional), value)])
    return patches


rng = random.Random(5)
for fixture in sorted(fixtures_dir.glob("*.json")):
    base = json.loads(fixture.read_text())
    emit(base)  # with its "$schema" annotation, as shipped
    base.pop("$schema", None)
    singles = single_patches(base)
    for patches in singles:
        emit(apply(base, patches))
    for value in QUIRKY_DATES:
        emit(apply(base, [(("updatedAt",), value)]), quirk="python-dollar-matches-before-newline")
    # Several problems at once: the relay must list every one of them.
    for _ in range(40):
        combined = [patch for patches in rng.sample(singles, rng.randint(2, 5)) for patch in patches]
        doc = apply(base, combined)
        if doc is not None:
            emit(doc)

# Documents that are not snapshot-shaped at all.
for doc in [None, 5, "snapshot", [], {}, {"kind": "widget"}, {"$schema": "x"}]:
    emit(doc)
