"""Full disk (issue 27, item 1): the relay's spool on a 2 MiB tmpfs of its
own, Postgres cut off from the relay (a proxy), a seeded mix of sends and
batches; at a seeded moment the disk is filled with `dd` (or, in the
read-only rounds, the spool is remounted read-only first), then serve gets
SIGKILL or SIGTERM (seeded), the disk is freed, Postgres comes back and
serve starts again on the same spool.

Oracle: every send answered 200 (each batch item ok) has exactly one audit
row after recovery; every other answer is a documented refusal (503
`Unavailable`, or `Draining` once SIGTERM landed) whose token never reached
the mock APNs; every request the mock APNs received has exactly one row;
no apns-id has two rows. A tmpfs that cannot be mounted fails the run."""

import os
import pathlib
import random
import shutil
import signal
import tempfile
import time
import urllib.parse

from . import traffic
from .pgproxy import CuttableProxy
from .relay import Options, Relay

COMPONENT = "fulldisk"
SPOOL_MEGABYTES = 2


class SmallSpool:
    """A tmpfs of `megabytes` MiB on a new directory (needs root)."""

    def __init__(self, megabytes):
        self.path = tempfile.mkdtemp(prefix="apns-relay-fuzz-spool-")
        status, output = traffic.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", self.path])
        if status != 0:
            os.rmdir(self.path)
            raise RuntimeError(f"mount -t tmpfs -o size={megabytes}m failed ({output or 'exit ' + str(status)}): needs root")

    def fill(self):
        """Fills the room left (dd stops at ENOSPC); the bytes still free (0 when full)."""
        traffic.run(["dd", "if=/dev/zero", f"of={self.path}/fill", "bs=4096"])
        return shutil.disk_usage(self.path).free

    def free(self):
        try:
            os.remove(f"{self.path}/fill")
        except FileNotFoundError:
            pass

    def relay_files(self):
        """The relay's journal and spool files still on the disk."""
        return [name for name in os.listdir(self.path) if name.startswith(("journal-", "segment-"))]

    def journal_files(self):
        return [name for name in os.listdir(self.path) if name.startswith("journal-")]

    def remount(self, read_only, timeout=30):
        """A file open for writing makes a read-only remount fail (EBUSY): tried until `timeout`."""
        return traffic.wait_until(
            lambda: traffic.run(["mount", "-o", "remount,ro" if read_only else "remount,rw", self.path])[0] == 0,
            timeout, interval=0.2)

    def unmount(self):
        for _ in range(50):
            if traffic.run(["umount", self.path])[0] == 0:
                break
            time.sleep(0.1)
        shutil.rmtree(self.path, ignore_errors=True)


def run(context, rounds, refusals_wanted):
    """`rounds` rounds (filled or read-only, SIGKILL or SIGTERM); each stops
    serve once at least `refusals_wanted` sends were refused."""
    # Every four rounds cover each disk fault with each signal, in a seeded order.
    combinations = [(mode, stop) for mode in ("fill", "readonly") for stop in (signal.SIGKILL, signal.SIGTERM)]
    random.Random(f"{context.seed}-fulldisk").shuffle(combinations)
    for number in range(rounds):
        mode, stop_signal = combinations[number % len(combinations)]
        round_once(context, number, mode, stop_signal, refusals_wanted)


def round_once(context, number, mode, stop_signal, refusals_wanted):
    tally = context.tally
    rng = random.Random(f"{context.seed}-fulldisk-{number}")
    case = f"round {number}: {mode}, {stop_signal.name}"
    tally.case(COMPONENT)
    try:
        spool = SmallSpool(SPOOL_MEGABYTES)
    except RuntimeError as error:
        tally.violation(COMPONENT, "cannot mount a small spool", case, str(error))
        return
    target = urllib.parse.urlsplit(context.database_url)
    proxy = CuttableProxy(target.hostname, target.port or 5432).start()
    relay = Relay(context.binary, context.database_url, serve_binary=context.serve_binary, label="fuzz-disk",
                  options=Options(spool=spool.path, serve_database_url=proxy.url, mock_delay_ms=5, request_log=True,
                                  drain_timeout_seconds=5))
    load = None
    try:
        relay.start()
        key = relay.keys["backend"]
        # Sends answered before the disk gives out, a seeded number of them.
        before = rng.randint(20, 120)
        if mode == "readonly":
            # Read-only needs no journal segment open for writing: with Postgres
            # reachable, once every row is in Postgres the journal has none.
            warm = traffic.Load(relay.port, key, f"{context.seed}-disk-{number}-warm", threads=4)
            traffic.wait_until(lambda: warm.count("ok") >= before, 120)
            warm_outcomes = warm.stop()
            if not traffic.wait_until(lambda: not spool.journal_files(), 60):
                tally.violation(COMPONENT, "journal never emptied", case, f"segments left with Postgres up: {spool.journal_files()}")
            if not spool.remount(read_only=True):
                tally.violation(COMPONENT, "cannot remount read-only", case, f"mount -o remount,ro {spool.path} kept failing for 30 s")
            proxy.cut()
            load = traffic.Load(relay.port, key, f"{context.seed}-disk-{number}")
        else:
            warm_outcomes = []
            proxy.cut()
            load = traffic.Load(relay.port, key, f"{context.seed}-disk-{number}")
            if not traffic.wait_until(lambda: load.count("ok") >= before, 120):
                tally.violation(COMPONENT, "no sends answered", case, f"fewer than {before} sends answered in 120 s with Postgres away")
            left = spool.fill()
            if left != 0:
                tally.violation(COMPONENT, "spool not full", case, f"{left} bytes free after dd")
        # Until enough refusals, or (a relay that does not refuse) many more sends answered on the broken disk.
        answered_before = load.count("ok")
        refused = traffic.wait_until(lambda: load.count("refused") >= refusals_wanted
                                     or load.count("ok") - answered_before >= 3 * refusals_wanted + 100, 120)
        if load.count("refused") < refusals_wanted:
            tally.violation(COMPONENT, "sends not refused on a full/read-only spool", case,
                            f"{load.count('refused')} refusals (wanted {refusals_wanted}), {load.count('ok') - answered_before} "
                            f"answered 200 after the disk {'filled' if mode == 'fill' else 'turned read-only'}"
                            + ("" if refused else " (gave up after 120 s)"))
        exit_status = relay.kill(stop_signal)
        outcomes = warm_outcomes + load.stop()
        load = None
        if stop_signal == signal.SIGTERM and exit_status != 0:
            tally.violation(COMPONENT, "unclean exit after SIGTERM", case, f"exit {exit_status}; log: {relay.log_tail(3)}")

        reached = relay.mock_requests()
        # Recovery: the disk freed (and writable), Postgres back, serve again on the same spool.
        if mode == "readonly":
            spool.remount(read_only=False)
        spool.free()
        proxy.restore()
        try:
            relay.start_serve_again()
        except RuntimeError as error:
            tally.violation(COMPONENT, "no restart on the recovered spool", case, f"{error}; log: {relay.log_tail(3)}")
            return
        judge(context, relay, spool, case, outcomes, reached)
    except Exception as error:  # noqa: BLE001 - a harness failure is a loud failure, not a pass
        tally.violation(COMPONENT, "harness error", case, f"{type(error).__name__}: {error}; log: {relay.log_tail(3)}")
    finally:
        if load is not None:
            load.stop()
        relay.stop()
        proxy.stop()
        if mode == "readonly":
            spool.remount(read_only=False, timeout=1)
        spool.unmount()
        if not context.keep:
            shutil.rmtree(relay.directory, ignore_errors=True)


def judge(context, relay, spool, case, outcomes, reached):
    """Waits for the recovered relay to write what it holds, drains it, and
    records the verdicts on what the mock APNs received and Postgres holds."""
    tally = context.tally
    for outcome in outcomes:
        tally.status(COMPONENT, outcome.status)
    answered, _, _, _ = classify(outcomes)
    reached_ids = {request["apnsId"].lower() for request in reached if request.get("apnsId")}
    wanted = set(answered) | reached_ids
    seen = []

    def settled():
        # Every row wanted is in Postgres, or the relay has nothing left to
        # write (no journal or spool file) and the count stopped growing.
        rows = traffic.rows_by_apns_id(relay.database_url, relay.instance)
        seen.append(len(rows))
        if wanted <= set(rows):
            return True
        return not spool.relay_files() and len(seen) >= 5 and seen[-1] == seen[-5]

    traffic.wait_until(settled, 120, interval=0.5)
    exit_status = relay.stop()
    if exit_status not in (0, None):
        tally.violation(COMPONENT, "unclean exit after SIGTERM", case + " (after recovery)", f"exit {exit_status}; log: {relay.log_tail(3)}")
    rows = traffic.rows_by_apns_id(relay.database_url, relay.instance)
    problems, figures = verdicts(outcomes, reached, rows)
    for kind, detail in problems:
        tally.violation(COMPONENT, kind, case, detail)
    tally.figure(COMPONENT, f"{case}: {len(outcomes)} requests, {figures}")


def classify(outcomes):
    """(answered apns-id -> answers, refused tokens, unanswered count, other answers)."""
    answered, refused, unanswered, unexpected = {}, set(), 0, []
    for outcome in outcomes:
        for token, (kind, value) in zip(outcome.tokens, outcome.items):
            if kind == "ok":
                answered[value] = answered.get(value, 0) + 1
            elif kind == "refused":
                refused.add(token)
            elif kind == "none":
                unanswered += 1
            else:
                unexpected.append(f"{outcome.kind} {outcome.status} {value}: {outcome.detail[:200]}")
    return answered, refused, unanswered, unexpected


def verdicts(outcomes, reached, rows, show=10):
    """The oracle, on what the sends were answered (`outcomes`), what the
    mock APNs received (`reached`, its request log) and the rows per apns-id
    after recovery: ([(kind, detail)], figures text)."""
    answered, refused_tokens, unanswered, unexpected = classify(outcomes)
    reached_ids, reached_tokens = {}, set()
    for request in reached:
        reached_tokens.add(traffic.token_of(request))
        if request.get("apnsId"):
            reached_ids[request["apnsId"].lower()] = reached_ids.get(request["apnsId"].lower(), 0) + 1
    missing = [apns_id for apns_id in answered if rows.get(apns_id, 0) < answered[apns_id]]
    reached_missing = [apns_id for apns_id in reached_ids if rows.get(apns_id, 0) == 0]
    duplicates = [apns_id for apns_id, count in rows.items() if count > max(1, answered.get(apns_id, 0))]
    refused_reached = refused_tokens & reached_tokens
    problems = [("answered send without its row", f"apns-id {a}: answered, {rows.get(a, 0)} rows after recovery") for a in missing[:show]]
    problems += [("send that reached APNs without a row", f"apns-id {a}") for a in reached_missing[:show]]
    problems += [("duplicated audit row", f"apns-id {a}: {rows[a]} rows") for a in duplicates[:show]]
    problems += [("refused send reached APNs", f"token …{t[-12:]}") for t in sorted(refused_reached)[:show]]
    problems += [("not a documented refusal", line) for line in unexpected[:show]]
    figures = (f"answered={len(answered)} rows={sum(min(rows.get(a, 0), 1) for a in answered)} "
               f"refused={len(refused_tokens)} unanswered={unanswered} reached-APNs={len(reached_ids)} missing={len(missing)} "
               f"reached-without-row={len(reached_missing)} duplicates={len(duplicates)} refused-but-sent={len(refused_reached)} "
               f"other-answers={len(unexpected)}")
    return problems, figures
