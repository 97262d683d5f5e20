"""What the relay promises for every answer, as checks that name the broken
promise: no 5xx for a client's mistake, every error in the JSON envelope
`{"error": {"type", "message", ...}}` (never HTML), no success for a wrong key."""

import json
from collections import Counter

SERVER_ERROR = "server error for a client error"
NON_JSON = "non-JSON error"
BAD_ENVELOPE = "error outside the envelope"
WRONG_STATUS = "unexpected status"
ACCEPTED_BAD_KEY = "success for a wrong key"
NO_ANSWER = "no answer"
UNHEALTHY = "healthz not 200"


def parse_json(body):
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        return None


def looks_html(response):
    head = response.body.lstrip()[:64].lower()
    return response.content_type == "text/html" or head.startswith(b"<")


def envelope_problems(response):
    """Problems with an error answer's body: JSON, and an `error` object with
    string `type` and `message` (the /3/device route adds APNs' `reason`)."""
    if looks_html(response):
        return [(NON_JSON, f"{response.status} HTML: {response.body[:120]!r}")]
    if response.content_type != "application/json":
        return [(NON_JSON, f"{response.status} content-type {response.content_type or 'none'!r}: {response.body[:120]!r}")]
    document = parse_json(response.body)
    if document is None:
        return [(NON_JSON, f"{response.status} body is not JSON: {response.body[:120]!r}")]
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("type"), str) or not isinstance(error.get("message"), str):
        return [(BAD_ENVELOPE, f"{response.status} {response.body[:160]!r}")]
    return []


def answer_problems(response, *, allowed_5xx=(), allowed=None):
    """The promises every non-health answer keeps. `allowed` (a set of
    statuses) narrows what fits this input; `allowed_5xx` lists server
    statuses that are right for it (501 for an unknown transfer coding)."""
    problems = []
    if response.status >= 500 and response.status not in allowed_5xx:
        problems.append((SERVER_ERROR, f"{response.status} {response.body[:200]!r}"))
    elif allowed is not None and response.status not in allowed:  # one verdict per status
        problems.append((WRONG_STATUS, f"{response.status} not in {sorted(allowed)}: {response.body[:160]!r}"))
    if response.status >= 400:
        problems.extend(envelope_problems(response))
    return problems


def answered_ids(response):
    """apns-ids this answer says were sent or refused with an audit row: the
    `apns-id` header, `apnsId` and `error.apnsId`, and the same in every
    batch result. /v1/describe's echo of the would-be request header is not one."""
    ids = set()
    header = response.header("apns-id")
    if header:
        ids.add(header.lower())
    document = parse_json(response.body)

    def collect(node):
        if not isinstance(node, dict):
            return
        for candidate in (node.get("apnsId"), (node.get("error") or {}).get("apnsId") if isinstance(node.get("error"), dict) else None):
            if isinstance(candidate, str) and candidate:
                ids.add(candidate.lower())

    if isinstance(document, dict):
        collect(document)
        for result in document.get("results") or []:
            collect(result)
    return ids


class Tally:
    """Counts per component, the violations with a reproducer each, and the
    apns-ids answered (how many distinct answers named each one)."""

    def __init__(self, strict=False):
        self.strict = strict  # known limits of the HTTP library count as violations too
        self.cases = Counter()
        self.violations = []  # (component, kind, case, detail)
        self.known = []  # violations known.py explains, same shape
        self.crashes = []  # (component, case, detail)
        self.answered = Counter()
        self.statuses = {}  # component → Counter of statuses (0: no answer)
        self.figures = []  # (component, text): what a component measured (rows, refusals, p99, RSS)

    def case(self, component):
        self.cases[component] += 1

    def status(self, component, status):
        self.statuses.setdefault(component, Counter())[status] += 1

    def violation(self, component, kind, case, detail):
        from .known import reason

        why = None if self.strict else reason(component, kind, case)
        if why:
            self.known.append((component, kind, case, f"{detail}\n       known: {why}"))
        else:
            self.violations.append((component, kind, case, detail))

    def figure(self, component, text):
        self.figures.append((component, text))

    def crash(self, component, case, detail):
        self.crashes.append((component, case, detail))

    def answer(self, response):
        for apns_id in answered_ids(response):
            self.answered[apns_id] += 1

    def count(self, kind, component=None):
        return sum(1 for c, k, _, _ in self.violations if k == kind and (component is None or c == component))

    def by_component(self):
        lines = []
        for component in sorted(self.cases):
            kinds = Counter(k for c, k, _, _ in self.violations if c == component)
            crashes = sum(1 for c, _, _ in self.crashes if c == component)
            text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no violations"
            known = sum(1 for c, _, _, _ in self.known if c == component)
            if known:
                text += f" ({known} known library limits)"
            lines.append(f"  {component:<12} {self.cases[component]:>6} cases, {crashes} crashes, {text}")
            statuses = self.statuses.get(component)
            if statuses:
                lines.append("  " + " " * 12 + " statuses: " + " ".join(f"{s or 'none'}×{n}" for s, n in sorted(statuses.items())))
        return lines
