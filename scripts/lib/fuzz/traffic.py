"""Sends as a backend makes them, for the components that judge what
happened to each one (full disk, idempotency, flood): every send carries a
token of its own, so the mock APNs' request log tells which sends reached
APNs, and every answer is kept with what it names."""

import json
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from . import bodies, wire
from .relay import APP, psql

# Refusals the API documents for a send the relay did not make: the audit
# journal or the idempotency store unavailable (503), draining at SIGTERM.
REFUSALS = {(503, "Unavailable"), (503, "Draining")}


@dataclass
class Outcome:
    """One request: what was sent and how it was answered."""

    kind: str  # "send" or "batch"
    tokens: list  # one per item (one for a send)
    status: int = 0  # 0: no answer (connection cut, timeout)
    error_type: str = ""
    detail: str = ""
    items: list = field(default_factory=list)  # per token: ("ok", apns-id) | ("refused", type) | ("error", type) | ("none", "")
    headers: dict = field(default_factory=dict)
    seconds: float = 0.0


def error_type(document):
    error = document.get("error") if isinstance(document, dict) else None
    return error.get("type", "") if isinstance(error, dict) else ""


def post(port, path, document, key, *, headers=(), timeout=40.0):
    """POSTs `document` as JSON; (status, parsed body or None, headers dict, seconds)."""
    started = time.monotonic()
    result = wire.request(port, "POST", path, body=json.dumps(document).encode(),
                          headers=[("Authorization", "Bearer " + key)] + list(headers), timeout=timeout)
    seconds = time.monotonic() - started
    response = result.first
    if response is None:
        how = "timed out" if result.timed_out else (result.error or "closed without an answer")
        return 0, how, {}, seconds
    document = None
    try:
        document = json.loads(response.body.decode("utf-8")) if response.body else None
    except (UnicodeDecodeError, ValueError):
        pass
    return response.status, document if document is not None else response.body[:200], dict(response.headers), seconds


def single_document(rng, token):
    operation = rng.choice(["alert", "background", "raw"])
    body = bodies.send_fields(rng, operation, token=token)
    if operation == "alert":
        body["snapshot"] = bodies.snapshot()
    elif operation == "background":
        body["payload"] = {"orderId": f"A-{rng.randrange(10000)}"}
    else:
        body["headers"] = {"apns-push-type": "alert"}
        body["payload"] = {"aps": {"alert": {"title": "Order shipped", "body": "Arrives Thursday"}}}
    return body


def send(port, key, rng, *, idempotency_key=None, timeout=40.0):
    """One /v1/send with a fresh token; its Outcome."""
    token = bodies.token(rng)
    headers = [("Idempotency-Key", idempotency_key)] if idempotency_key else []
    return send_document(port, key, single_document(rng, token), token, headers=headers, timeout=timeout)


def send_document(port, key, document, token, *, headers=(), timeout=40.0):
    outcome = Outcome("send", [token])
    status, body, answer_headers, seconds = post(port, "/v1/send", document, key, headers=headers, timeout=timeout)
    outcome.status, outcome.headers, outcome.seconds = status, answer_headers, seconds
    if status == 0:
        outcome.detail = body
        outcome.items = [("none", "")]
    elif status == 200 and isinstance(body, dict) and body.get("apnsId"):
        outcome.items = [("ok", body["apnsId"].lower())]
    else:
        outcome.error_type = error_type(body) if isinstance(body, dict) else ""
        outcome.detail = json.dumps(body)[:300] if isinstance(body, dict) else repr(body)[:300]
        kind = "refused" if (status, outcome.error_type) in REFUSALS else "error"
        outcome.items = [(kind, outcome.error_type or str(status))]
    return outcome


def batch(port, key, rng, items=None, *, keys=None, timeout=40.0):
    """One /v1/send/batch of `items` sends (a token each); its Outcome.
    `keys` gives each item an idempotencyKey."""
    count = items or rng.randint(2, 4)
    tokens = [bodies.token(rng) for _ in range(count)]
    documents = []
    for index, token in enumerate(tokens):
        document = single_document(rng, token)
        if keys:
            document["idempotencyKey"] = keys[index]
        documents.append(document)
    return batch_documents(port, key, documents, tokens, timeout=timeout)


def batch_documents(port, key, documents, tokens, *, timeout=40.0):
    outcome = Outcome("batch", tokens)
    status, body, headers, seconds = post(port, "/v1/send/batch", {"items": documents}, key, timeout=timeout)
    outcome.status, outcome.headers, outcome.seconds = status, headers, seconds
    if status == 0:
        outcome.detail = body
        outcome.items = [("none", "")] * len(tokens)
        return outcome
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("results"), list):
        outcome.error_type = error_type(body) if isinstance(body, dict) else ""
        outcome.detail = json.dumps(body)[:300] if isinstance(body, dict) else repr(body)[:300]
        kind = "refused" if (status, outcome.error_type) in REFUSALS else "error"
        outcome.items = [(kind, outcome.error_type or str(status))] * len(tokens)
        return outcome
    outcome.items = [("none", "")] * len(tokens)
    for result in body["results"]:
        index = result.get("item") if isinstance(result, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(tokens):
            continue
        if result.get("ok") and isinstance(result.get("apnsId"), str):
            outcome.items[index] = ("ok", result["apnsId"].lower())
        else:
            kind_type = error_type(result)
            kind = "refused" if (503, kind_type) in REFUSALS else "error"
            outcome.items[index] = (kind, kind_type or json.dumps(result)[:200])
    return outcome


class Load:
    """Threads sending a seeded mix of sends and batches until stop()."""

    def __init__(self, port, key, seed, threads=6, batch_share=0.3):
        self.port, self.key, self.seed, self.batch_share = port, key, seed, batch_share
        self.outcomes = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._next = 0
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self):
        import random

        while not self._stopped.is_set():
            with self._lock:
                index = self._next
                self._next += 1
            rng = random.Random(f"{self.seed}-{index}")
            if rng.random() < self.batch_share:
                outcome = batch(self.port, self.key, rng, timeout=30)
            else:
                outcome = send(self.port, self.key, rng, timeout=30)
            with self._lock:
                self.outcomes.append(outcome)
            if outcome.status == 0 and not self._stopped.is_set():
                time.sleep(0.05)  # the relay is down: do not spin

    def count(self, kind):
        with self._lock:
            return sum(1 for outcome in self.outcomes for item_kind, _ in outcome.items if item_kind == kind)

    def stop(self):
        self._stopped.set()
        for thread in self._threads:
            thread.join(60)
        return list(self.outcomes)


def wait_until(predicate, timeout, interval=0.1):
    """Polls `predicate` until it is true or `timeout` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def rows_by_apns_id(database_url, instance):
    """apns-id -> rows in apns_audit for this relay instance."""
    counts = {}
    for line in psql(database_url, f"SELECT lower(apns_id), count(*) FROM apns_audit WHERE relay_instance = '{instance}' GROUP BY 1").splitlines():
        if "\t" in line:
            apns_id, count = line.split("\t")
            counts[apns_id] = int(count)
    return counts


def token_of(request):
    """The device token of a request the mock received (its path's last part)."""
    return urllib.parse.unquote(request.get("path", "").rsplit("/", 1)[-1]).lower()


def run(arguments, timeout=120):
    """A helper command (mount, dd); (exit status, output)."""
    result = subprocess.run(arguments, capture_output=True, text=True, timeout=timeout)
    return result.returncode, (result.stdout + result.stderr).strip()
