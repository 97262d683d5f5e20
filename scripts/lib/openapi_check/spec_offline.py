"""The checks that need no relay: docs/openapi.yaml is consistent with itself,
and every example it and the guide (docs/api.md) show is valid against
the schema it illustrates. `check-openapi --examples-only` runs only these."""

import json
import pathlib

from .examples import guide_examples, spec_examples


def run_offline(spec, checks, snapshot, snapshot_file, guide):
    error_types_declared(spec, checks)
    no_split_flow_mappings(spec, checks)
    snapshot_is_valid(spec, checks, snapshot, snapshot_file)
    spec_examples_validate(spec, checks)
    guide_examples_validate(spec, checks, guide)


def error_types_declared(spec, checks):
    declared = set(spec.at("/components/schemas/ErrorType")["enum"])
    table = set(spec.error_types)
    problems = []
    if declared != table:
        problems.append(f"ErrorType enum and x-error-types differ: {sorted(declared ^ table)}")
    checks.record("spec: every error type has a status in x-error-types", problems)


def no_split_flow_mappings(spec, checks):
    # A comma in an unquoted flow-mapping value ({description: a, b}) silently makes a key "b"
    # with a null value; no OpenAPI or JSON Schema key contains a space.
    split = []
    stack = [(spec.doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and " " in key and value is None:
                    split.append(f"{where}/{key}")
                stack.append((value, f"{where}/{key}"))
        elif isinstance(node, list):
            stack.extend((value, f"{where}/{i}") for i, value in enumerate(node))
    checks.record("spec: no YAML flow mapping was split at a comma", split)


def snapshot_is_valid(spec, checks, snapshot, snapshot_file):
    """The snapshot the live checks send is itself valid."""
    problems = []
    problems.extend(f"snapshot {snapshot_file}: {p}" for p in spec.errors(
        "/components/schemas/LiveSurfaceSnapshot", snapshot))
    checks.record("spec: the snapshot used for sends is a valid LiveSurfaceSnapshot", problems)


def spec_examples_validate(spec, checks):
    count, problems = 0, []
    for pointer, schema_pointer, value in spec_examples(spec):
        count += 1
        for problem in spec.errors(schema_pointer, value):
            problems.append(f"{pointer}: {problem}")
    checks.record(f"spec: all {count} examples validate against their schemas", problems)


def guide_examples_validate(spec, checks, guide):
    if not guide or not pathlib.Path(guide).exists():
        return
    count, problems = 0, []
    for line, pointer, text in guide_examples(guide):
        count += 1
        try:
            value = json.loads(text)
        except ValueError as error:
            problems.append(f"line {line}: not JSON: {error}")
            continue
        try:
            problems.extend(f"line {line}: {p}" for p in spec.errors(pointer, value))
        except Exception as error:  # an annotation naming nothing in the spec
            problems.append(f"line {line}: cannot check against {pointer}: {type(error).__name__}")
    checks.record(f"guide: all {count} annotated examples in {guide} validate", problems)
