"""What every live check shares: the parsed arguments, the spec, the verdicts,
a client for the ingress and one for the health listener, the device
token and snapshot the sends carry, and `call`, which sends one request
and records whether the answer matches its operation."""

import http.client
import json
import secrets

from .conformance import conformance
from .http_client import Client
from .spec import escape_pointer


def load_snapshot(file):
    with open(file, encoding="utf-8") as handle:
        snapshot = json.load(handle)
    snapshot.pop("$schema", None)  # an editor annotation; the contract schema does not list it
    return snapshot


class LiveContext:
    def __init__(self, args, spec, checks, snapshot):
        self.args = args
        self.spec = spec
        self.checks = checks
        self.client = Client(args.base_url, args.timeout)
        self.health = Client(args.health_base_url or args.base_url, args.timeout)
        self.token = args.token or secrets.token_hex(32)
        self.snapshot = snapshot

    @staticmethod
    def op(path, method):
        return f"/paths/{escape_pointer(path)}/{method.lower()}"

    def call(self, name, path, method, *, expect=None, check=None, client=None, template=None, **kwargs):
        """Send, check conformance to the operation, run extra checks; returns the response or None."""
        template = template or path
        try:
            response = (client or self.client).request(method, path, **kwargs)
        except (OSError, http.client.HTTPException) as error:
            self.checks.record(name, [f"request failed: {error}"])
            return None
        problems = conformance(self.spec, self.op(template, method), response)
        if expect is not None:
            allowed = expect if isinstance(expect, (list, tuple, set)) else [expect]
            if response.status not in allowed:
                problems.insert(0, f"expected {'/'.join(map(str, allowed))}, got {response.summary()}")
        if check:
            problems.extend(check(response) or [])
        self.checks.record(name, problems, response.summary())
        return response

    def send_fields(self, **extra):
        fields = {"app": self.args.app, "environment": self.args.environment}
        fields.update(extra)
        return fields

    def alert(self, **extra):
        fields = {"operation": "alert", "token": self.token, "snapshot": self.snapshot}
        fields.update(extra)
        return self.send_fields(**fields)

    def success_or_documented(self):
        """Status expectation for a send: 2xx with --expect-success, else anything documented."""
        return [200] if self.args.expect_success else None
