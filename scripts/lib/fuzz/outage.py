"""Idempotency under a Postgres outage (issue 27, item 2): keyed sends
(`Idempotency-Key` on /v1/send, `idempotencyKey` on batch items) wait at a
mock APNs that answers after a delay; once every one reached APNs,
Postgres is cut off from the relay (a proxy). The sends are answered, each
key is tried again during the outage, then the campaign waits past the
idempotency lease (send_deadline_seconds + 30 s), brings Postgres back and
tries every key again.

Oracle: the mock APNs received each key's send once (its token is the
key's own, so requests are counted per token), and every later answer for
a key is the first answer (the same apns-id) or a documented refusal that
sent nothing (409 IdempotencyKeyInFlight, 503 Unavailable): never a second
push."""

import random
import shutil
import threading
import time
import urllib.parse

from . import bodies, traffic
from .pgproxy import CuttableProxy
from .relay import Options, Relay

COMPONENT = "idempotency"
MOCK_DELAY_MS = 1500
SEND_DEADLINE_SECONDS = 4  # above the mock's delay; the lease is this + 30 s
LEASE_SECONDS = SEND_DEADLINE_SECONDS + 30  # RelayServer: leaseSeconds = send_deadline_seconds + 30
REPEAT_REFUSALS = {(409, "IdempotencyKeyInFlight"), (503, "Unavailable")}


class Key:
    """One key and the send it names: its token, and the document sent each time."""

    def __init__(self, name, token, document, batch_index=None):
        self.name, self.token, self.document, self.batch_index = name, token, document, batch_index
        self.first = None  # ("ok", apns-id) or another item
        self.answered_in_outage = False  # the first answer came after Postgres was cut: the case this checks
        self.repeats = []  # (phase, status, item)


def run(context, keys_wanted):
    tally = context.tally
    rng = random.Random(f"{context.seed}-idempotency")
    case = f"{keys_wanted} keys through a Postgres outage"
    target = urllib.parse.urlsplit(context.database_url)
    proxy = CuttableProxy(target.hostname, target.port or 5432).start()
    relay = Relay(context.binary, context.database_url, serve_binary=context.serve_binary, label="fuzz-idem",
                  options=Options(serve_database_url=proxy.url, mock_delay_ms=MOCK_DELAY_MS, request_log=True,
                                  send_deadline_seconds=SEND_DEADLINE_SECONDS, drain_timeout_seconds=10))
    try:
        relay.start()
        port, api_key = relay.port, relay.keys["backend"]
        prefix = f"fuzz-{context.seed}-{relay.instance}-"
        # Singles and batches of 2-3 keyed items, a seeded mix.
        groups = []
        made = 0
        while made < keys_wanted:
            size = 1 if rng.random() < 0.6 else min(rng.randint(2, 3), keys_wanted - made)
            group = []
            for index in range(size):
                token = bodies.token(rng)
                group.append(Key(prefix + str(made), token, traffic.single_document(rng, token), index if size > 1 else None))
                made += 1
            groups.append(group)
        keys = [key for group in groups for key in group]
        by_token = {key.token: key for key in keys}

        def send_group(group, phase):
            if group[0].batch_index is None:
                key = group[0]
                outcome = traffic.send_document(port, api_key, key.document, key.token, headers=[("Idempotency-Key", key.name)], timeout=60)
                results = [(key, outcome.status, outcome.items[0])]
            else:
                documents = [dict(key.document, idempotencyKey=key.name) for key in group]
                outcome = traffic.batch_documents(port, api_key, documents, [key.token for key in group], timeout=60)
                results = [(key, outcome.status, item) for key, item in zip(group, outcome.items)]
            for key, status, item in results:
                tally.status(COMPONENT, status)
                if phase == "first":
                    key.first = (status, item)
                    key.answered_in_outage = cut.is_set()
                else:
                    key.repeats.append((phase, status, item))

        cut = threading.Event()
        threads = [threading.Thread(target=send_group, args=(group, "first"), daemon=True) for group in groups]
        for thread in threads:
            thread.start()
        # Every key's send is at the mock (answered after the delay): cut Postgres now.
        arrived = traffic.wait_until(lambda: {traffic.token_of(r) for r in relay.mock_requests()} >= set(by_token), 60, interval=0.02)
        proxy.cut()
        cut.set()
        if not arrived:
            tally.violation(COMPONENT, "sends never reached APNs", case,
                            f"{len(relay.mock_requests())} of {len(keys)} requests at the mock in 60 s")
        for thread in threads:
            thread.join(90)
        tally.cases[COMPONENT] += len(keys)
        # Every key again while Postgres is away: in flight or unavailable, never sent again.
        for group in groups:
            send_group(group, "outage")
        # Past the lease, so an in-flight key the relay could not settle may be claimed over.
        time.sleep(LEASE_SECONDS + 2)
        proxy.restore()
        # Every key again with Postgres back: 503 while the relay reconnects is retried, a bounded number of times.
        for group in groups:
            for attempt in range(20):
                send_group(group, "after")
                if not any(key.repeats[-1][2][1] == "Unavailable" for key in group):
                    break
                time.sleep(0.5)
        requests = relay.mock_requests()
        judge(context, case, keys, by_token, requests)
    except Exception as error:  # noqa: BLE001 - a harness failure is a loud failure, not a pass
        tally.violation(COMPONENT, "harness error", case, f"{type(error).__name__}: {error}; log: {relay.log_tail(3)}")
    finally:
        relay.stop()
        proxy.stop()
        if not context.keep:
            shutil.rmtree(relay.directory, ignore_errors=True)


def judge(context, case, keys, by_token, requests):
    tally = context.tally
    pushes = {}  # token -> requests the mock received
    apns_ids = {}  # token -> distinct apns-ids
    for request in requests:
        token = traffic.token_of(request)
        pushes[token] = pushes.get(token, 0) + 1
        apns_ids.setdefault(token, set()).add((request.get("apnsId") or "").lower())
    duplicates = [key for key in keys if pushes.get(key.token, 0) > 1]
    firsts_ok = sum(1 for key in keys if key.first and key.first[1][0] == "ok")
    replayed, refused, wrong = 0, 0, []
    for key in keys:
        first_status, first_item = key.first or (0, ("none", ""))
        if first_item[0] != "ok":
            wrong.append(f"key {key.name}: first answer {first_status} {first_item}")
        for phase, status, item in key.repeats:
            if item[0] == "ok" and first_item[0] == "ok" and item[1] == first_item[1]:
                replayed += 1
            elif item[0] in ("refused", "error") and (status, item[1]) in REPEAT_REFUSALS:
                refused += 1
            elif item[0] in ("refused", "error") and item[1] in {kind for _, kind in REPEAT_REFUSALS}:
                refused += 1  # a batch item's refusal carries the type, the batch itself 200
            else:
                wrong.append(f"key {key.name} ({phase}): {status} {item}, first {first_item}")
    for key in duplicates[:20]:
        tally.violation(COMPONENT, "second push for one key", case,
                        f"key {key.name}: the mock APNs received its send {pushes[key.token]}× (apns-ids {sorted(apns_ids[key.token])})")
    for line in wrong[:20]:
        tally.violation(COMPONENT, "repeat not answered with the first answer", case, line)
    in_outage = sum(1 for key in keys if key.answered_in_outage)
    if in_outage == 0:
        tally.violation(COMPONENT, "no send in flight at the outage", case,
                        "every first answer came before Postgres was cut: nothing was checked (the mock's delay too short for this machine?)")
    never = [key for key in keys if pushes.get(key.token, 0) == 0]
    for key in never[:5]:
        tally.violation(COMPONENT, "keyed send never reached APNs", case, f"key {key.name}")
    tally.figure(COMPONENT, f"{case}: keys={len(keys)} first answered 200={firsts_ok} (after the cut: {in_outage}) APNs requests={sum(pushes.values())} "
                            f"duplicates={len(duplicates)} repeats replayed={replayed} refused={refused} wrong={len(wrong)} "
                            f"(lease {LEASE_SECONDS} s, mock delay {MOCK_DELAY_MS} ms)")
