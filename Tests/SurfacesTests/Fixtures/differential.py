"""Generates mutations of the reference fixtures and judges each with the
`jsonschema` package (an implementation nobody on this project wrote).

Prints one JSON object per line: {"doc": <document>, "valid": <bool>}.
The Swift test feeds every doc to the relay's validator and expects the same
verdict. Usage: python3 differential.py <fixtures-dir> <schema.json>
"""
import copy
import json
import pathlib
import sys

import jsonschema

fixtures_dir, schema_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
schema = json.loads(schema_path.read_text())
checker = jsonschema.FormatChecker()
if "date-time" not in checker.checkers:
    sys.exit("jsonschema cannot check date-time here: pip install rfc3339-validator")
validator = jsonschema.Draft202012Validator(schema, format_checker=checker)

KINDS = ["liveActivity", "widget", "control", "lockAccessory", "standby", "notification"]
WRONG_TYPES = [None, True, 7, 2.5, "text", [], {}]
NUMBERS = [-0.01, 0, 0.0, 0.5, 1, 1.0, 1.01, 2]
INTEGERS = [-1, 0, 3.0, 2.5, 9007199254740991, 9007199254740992]
STRINGS = ["", "x", "é" * 20, "é" * 21, "a" * 20, "a" * 21]
DATES = [
    "2026-05-12T18:30:00Z", "2026-05-12T18:30:00.123456Z", "2026-05-12T18:30:00+05:30", "2026-05-12T18:30:00-00:00",
    "2026-05-12T18:30Z", "2026-05-12 18:30:00Z", "2026-05-12t18:30:00z", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-05-12T24:00:00Z",
    "2026-05-12T23:60:00Z", "2026-05-12T23:59:60Z", "2026-05-12T18:30:00+24:00", "2026-05-12T18:30:00", "2026-05-12",
    "2026-05-12T18:30:00.Z", "26-05-12T18:30:00Z", "2026-5-12T18:30:00Z", "",
]
LINKS = ["a://", "myapp://x", "a1+.-://x", "A://x", "1a://x", "a:/x", "mailto:x", "ab", " a://x", "https://example.com/x", "a-b.c+d://"]


def judge(doc):
    return validator.is_valid(doc)


def emit(doc):
    print(json.dumps({"doc": doc, "valid": judge(doc)}, ensure_ascii=False))


for path in sorted(fixtures_dir.glob("*.json")):
    base = json.loads(path.read_text())
    base.pop("$schema", None)
    kind = base["kind"]
    emit(base)
    for key in list(base):
        doc = copy.deepcopy(base)
        del doc[key]
        emit(doc)
    for value in WRONG_TYPES + ["4", 5, "5"]:
        doc = copy.deepcopy(base)
        doc["schemaVersion"] = value
        emit(doc)
    for key in ["id", "surfaceId", "state"]:
        for value in WRONG_TYPES + ["", "purple", "bad_timing", "completed"]:
            doc = copy.deepcopy(base)
            doc[key] = value
            emit(doc)
    for value in DATES + [1715538600]:
        doc = copy.deepcopy(base)
        doc["updatedAt"] = value
        emit(doc)
    for other in KINDS + ["bogus", 3]:
        doc = copy.deepcopy(base)
        doc["kind"] = other
        emit(doc)
    doc = copy.deepcopy(base)
    doc["extra"] = 1
    emit(doc)
    slice_ = base[kind]
    for field in list(slice_):
        doc = copy.deepcopy(base)
        del doc[kind][field]
        emit(doc)
        for value in WRONG_TYPES + NUMBERS + INTEGERS + STRINGS + LINKS + [
            "prompted", "inProgress", "completing", "systemSmall", "manual", "afterDate", "toggle", "button", "deepLink",
            "accessoryCircular", "accessoryInline", "card", "night", "default", "monochrome", "surface-update",
            "passive", "timeSensitive", "time-sensitive", "critical",
        ]:
            doc = copy.deepcopy(base)
            doc[kind][field] = value
            emit(doc)
    for extra in ["unknownField", "primaryText", "subtitle", "family"]:
        doc = copy.deepcopy(base)
        doc[kind][extra] = "x"
        emit(doc)
    # The optional fields each slice allows, added one at a time.
    for optional, value in [("contextLabel", "c"), ("statusLine", ""), ("actionLabel", ""), ("estimatedSeconds", 5),
                            ("family", "systemLarge"), ("reloadPolicy", "afterDate"), ("state", True), ("intent", "i"),
                            ("subtitle", "s"), ("category", "other"), ("threadId", "t"), ("interruptionLevel", "timeSensitive"),
                            ("relevanceScore", 0.3), ("targetContentId", ""), ("gaugeValue", 1.5), ("shortText", "é" * 20),
                            ("tint", "monochrome")]:
        doc = copy.deepcopy(base)
        doc[kind][optional] = value
        emit(doc)
