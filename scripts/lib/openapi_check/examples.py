"""The examples the documentation shows: media-type examples in the spec,
and the fenced blocks of a markdown guide annotated with the schema they
follow (`<!-- schema: #/components/schemas/... -->`)."""

import pathlib
import re

from .spec import escape_pointer


def guide_examples(file):
    """(line, schema pointer, JSON text) for each fenced block after a `<!-- schema: #/... -->` line.
    In a shell block the JSON is the here-document (<<'EOF' ... EOF)."""
    lines = pathlib.Path(file).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = re.match(r"^<!-- schema: #(/\S+) -->$", lines[index].strip())
        index += 1
        if not match:
            continue
        start = index
        if start >= len(lines) or not lines[start].startswith("```"):
            yield start, match.group(1), ""  # reported as not JSON
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), len(lines))
        block = lines[start + 1 : end]
        if lines[start].strip() in ("```sh", "```bash"):
            opening = next((i for i, l in enumerate(block) if l.rstrip().endswith("<<'EOF'")), None)
            block = block[opening + 1 : block.index("EOF", opening + 1)] if opening is not None else []
        yield start + 1, match.group(1), "\n".join(block)
        index = end + 1


def spec_examples(spec):
    """(example pointer, schema pointer, value) for every media-type example in the spec."""
    def media_types(node, pointer):
        if isinstance(node, dict):
            for key, value in node.items():
                child = f"{pointer}/{escape_pointer(key)}"
                if key == "content" and isinstance(value, dict):
                    for media, media_object in value.items():
                        yield f"{child}/{escape_pointer(media)}", media_object
                else:
                    yield from media_types(value, child)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from media_types(value, f"{pointer}/{index}")

    for pointer, media_object in media_types(spec.doc, ""):
        if "schema" not in media_object:
            continue
        schema_pointer = f"{pointer}/schema"
        if "example" in media_object:
            yield f"{pointer}/example", schema_pointer, media_object["example"]
        for name, example in (media_object.get("examples") or {}).items():
            example, _ = spec.deref(example, f"{pointer}/examples/{escape_pointer(name)}")
            if "value" in example:
                yield f"{pointer}/examples/{name}", schema_pointer, example["value"]
