"""docs/openapi.yaml loaded: its external schema files, JSON pointers, and
validation of an instance against the schema at a pointer."""

import json
import pathlib
import urllib.parse

import jsonschema
import yaml
from referencing import Registry
from referencing.jsonschema import DRAFT202012


def escape_pointer(token):
    return str(token).replace("~", "~0").replace("/", "~1")


class Spec:
    """The OpenAPI document, its external schema files, and schema validation by JSON pointer."""

    def __init__(self, path):
        self.path = pathlib.Path(path).resolve()
        self.uri = self.path.as_uri()
        with open(self.path, encoding="utf-8") as handle:
            self.doc = yaml.safe_load(handle)
        registry = Registry().with_resource(self.uri, DRAFT202012.create_resource(self.doc))
        for uri, contents in self._external_documents(self.doc, self.uri, set()):
            registry = registry.with_resource(uri, DRAFT202012.create_resource(contents))
        self.registry = registry.crawl()
        self._validators = {}

    def _external_documents(self, node, base, seen):
        """Every file a non-local $ref points at (recursively), as (uri, contents)."""
        found = []
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                ref = item.get("$ref")
                if isinstance(ref, str) and not ref.startswith("#"):
                    target = urllib.parse.urljoin(base, ref.split("#", 1)[0])
                    if target not in seen:
                        seen.add(target)
                        file = pathlib.Path(urllib.parse.urlparse(target).path)
                        with open(file, encoding="utf-8") as handle:
                            contents = yaml.safe_load(handle) if file.suffix in (".yaml", ".yml") else json.load(handle)
                        found.append((target, contents))
                        found.extend(self._external_documents(contents, target, seen))
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
        return found

    def at(self, pointer):
        node = self.doc
        for raw in pointer.lstrip("/").split("/") if pointer else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]
        return node

    def deref(self, node, pointer):
        """Follow local $refs of non-schema objects (responses, headers, parameters)."""
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"non-local $ref {ref} outside a schema")
            pointer = ref[1:]
            node = self.at(pointer)
        return node, pointer

    def validator(self, pointer):
        if pointer not in self._validators:
            self._validators[pointer] = jsonschema.Draft202012Validator(
                {"$ref": f"{self.uri}#{pointer}"},
                registry=self.registry,
                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
            )
        return self._validators[pointer]

    def errors(self, pointer, instance):
        """Schema violations of instance against the schema at pointer, as short strings."""
        problems = []
        for error in self.flatten(self.validator(pointer).iter_errors(instance)):
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            message = error.message
            if len(message) > 160:  # a message that quotes the whole instance: name the rule instead
                rule = "/".join(str(p) for p in list(error.relative_schema_path)[-4:])
                message = f"fails '{error.validator}' ({rule})"
            problems.append(f"{where}: {message}")
        return problems

    @staticmethod
    def without_echoes(errors):
        """When an allOf branch fails, unevaluatedProperties also flags every field that branch
        declared; that echo hides the real problem, so it goes when there is another error."""
        errors = sorted(errors, key=lambda e: list(e.path))
        if any(e.validator != "unevaluatedProperties" for e in errors):
            errors = [e for e in errors if e.validator != "unevaluatedProperties"]
        return errors

    def flatten(self, errors):
        """Errors with each failed oneOf/anyOf replaced by the failures of its likeliest branch."""
        flat = []
        for error in self.without_echoes(errors):
            if error.context and error.validator in ("oneOf", "anyOf"):
                branches = {}
                for sub in error.context:
                    branches.setdefault(sub.relative_schema_path[0], []).append(sub)
                # The branch meant is the one whose discriminator (a const) matched, else the closest.
                likeliest = min(branches.values(), key=lambda errs: (any(e.validator == "const" for e in errs), len(errs)))
                flat.extend(self.flatten(likeliest))
            else:
                flat.append(error)
        return flat

    def operations(self):
        for path, item in self.doc["paths"].items():
            for method in ("get", "put", "post", "delete", "patch", "head", "options"):
                if method in item:
                    yield path, method.upper(), f"/paths/{escape_pointer(path)}/{method}"

    def methods(self, path):
        return {m.upper() for m in self.doc["paths"][path] if m in ("get", "put", "post", "delete", "patch")}

    @property
    def error_types(self):
        return self.doc["components"]["x-error-types"]


# --------------------------------------------------------------------------- HTTP
