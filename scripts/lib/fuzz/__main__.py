"""python3 -m fuzz --binary .build/debug/apns-relay --database-url URL [--seed N] [--cases N] [--seconds S]

Starts a mock APNs and `apns-relay serve` (audit in a fresh database on the
given Postgres), runs the components, drains the relay, checks the audit,
and prints one line per component, every violation with a reproducer, the
figures of the fault components, and the summary line. Exit 0 when nothing
was violated, 1 otherwise, 2 when the campaign could not start.

The request components (schemathesis, mutation, edges, framing, auth) share
one relay. The fault components start a relay each (a fresh database, the
mock APNs writing every request it receives to a log):
  fulldisk     spool on a 2 MiB tmpfs (needs root), Postgres cut off, sends and
               batches; the disk filled with dd (or remounted read-only) at a
               seeded moment, SIGKILL or SIGTERM, disk freed, Postgres back,
               serve again: every answered send has exactly one row, every other
               answer is a documented refusal that reached no APNs
  flood        idle and header-dribbling sockets from 21+ loopback addresses past
               the global connection limit; a bystander's sends on 127.0.0.1 are
               all answered 200 with p99 under 1 s
  largefield   every field at its maximum, bodies near 1 MiB, one field just or
               far over its maximum (mutated): no 5xx, over-limit refused 400
               naming the field, RSS back within 25% of its start, rows < 4 KiB
  idempotency  keyed sends (header and batch items) in flight at a slow mock APNs
               when Postgres is cut; every key repeated during the outage and
               after the lease (send_deadline_seconds + 30 s) with Postgres back:
               APNs received each key's send once, repeats get the first answer
               or 409/503
  resolver     serve in a mount namespace whose DNS server stops answering (the
               APNs origins and Postgres by name): sends answered within their
               deadline, /healthz within 2 s, the drain within its bound with
               exit 0; after a restart every answered send has one audit row"""

import argparse
import os
import shutil
import sys
import time

from types import SimpleNamespace

from . import audit, auth, edges, flood, framing, fulldisk, largefield, mutation, outage, resolver, schema, verdicts
from .campaign import Campaign
from .relay import Relay
from .traffic import wait_until

COMPONENTS = ["schemathesis", "mutation", "edges", "framing", "auth", "fulldisk", "flood", "largefield", "idempotency", "resolver"]
FAULT_COMPONENTS = {"fulldisk", "flood", "largefield", "idempotency", "resolver"}


def arguments():
    parser = argparse.ArgumentParser(prog="fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="the apns-relay executable")
    parser.add_argument("--database-url", help="a Postgres the fuzz database is created on (no audit check without one)")
    parser.add_argument("--seed", type=int, help="RNG seed for the mutation fuzzer and schemathesis (default: random, printed)")
    parser.add_argument("--cases", type=int, default=300, help="mutation cases (default 300; 0 with --seconds: until the time is spent)")
    parser.add_argument("--seconds", type=float, default=0, help="time budget for the mutation fuzzer and for schemathesis (0: none)")
    parser.add_argument("--schemathesis-examples", type=int, default=5, help="schemathesis examples per operation (default 5)")
    parser.add_argument("--components", default=",".join(COMPONENTS), help="comma-separated subset of " + ",".join(COMPONENTS))
    parser.add_argument("--show", type=int, default=40, help="violations to print in full (default 40)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (configuration, logs, HAR)")
    parser.add_argument("--verbose", action="store_true", help="print each violation as it happens")
    parser.add_argument("--strict", action="store_true",
                        help="count the known limits of libmicrohttpd (scripts/lib/fuzz/known.py) as violations")
    parser.add_argument("--serve-binary", help="a different apns-relay for `serve` (an older build: do the oracles find its bugs?); "
                                               "--binary still runs the mock APNs")
    parser.add_argument("--disk-rounds", type=int, default=4,
                        help="fulldisk rounds; every four cover filled and read-only with SIGKILL and SIGTERM, in a seeded order (default 4)")
    parser.add_argument("--disk-refusals", type=int, default=50, help="fulldisk: refusals before the kill (default 50)")
    parser.add_argument("--flood-addresses", type=int, default=21, help="flood: source addresses, 127.0.0.2 on (default 21)")
    parser.add_argument("--flood-per-address", type=int, default=14,
                        help=f"flood: sockets per address, under the cap of {flood.PER_ADDRESS} (default 14)")
    parser.add_argument("--flood-sends", type=int, default=100, help="flood: the bystander's sends (default 100)")
    parser.add_argument("--large-cases", type=int, default=250, help="largefield: cases after the warm-up (default 250)")
    parser.add_argument("--idempotency-keys", type=int, default=12, help="idempotency: keys through the outage (default 12)")
    return parser.parse_args()


def main():
    args = arguments()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    components = [c.strip() for c in args.components.split(",") if c.strip()]
    unknown = set(components) - set(COMPONENTS)
    if unknown:
        print(f"fuzz: unknown components {sorted(unknown)}", file=sys.stderr)
        return 2
    relay = Relay(args.binary, args.database_url, serve_binary=args.serve_binary)
    try:
        relay.start()
    except Exception as error:  # noqa: BLE001 - reported, then exit 2
        print(f"fuzz: cannot start the relay: {error}\n{relay.log_tail(20)}", file=sys.stderr)
        relay.stop()
        return 2
    print(f"fuzz: seed {seed} (rerun with --seed {seed}); relay on 127.0.0.1:{relay.port}, work in {relay.directory}", flush=True)
    tally = verdicts.Tally(strict=args.strict)
    campaign = Campaign(relay, tally, args.verbose)
    context = SimpleNamespace(binary=args.binary, serve_binary=args.serve_binary, database_url=args.database_url,
                              seed=seed, tally=tally, keep=args.keep)
    started = time.monotonic()
    try:
        for component in components:
            began = time.monotonic()
            if component in FAULT_COMPONENTS and not args.database_url:
                tally.violation(component, "no Postgres", "--database-url", "the fault components judge the audit: give --database-url")
                continue
            if component == "fulldisk":
                fulldisk.run(context, args.disk_rounds, args.disk_refusals)
            elif component == "flood":
                flood.run(context, args.flood_addresses, args.flood_per_address, args.flood_sends)
            elif component == "largefield":
                largefield.run(context, args.large_cases)
            elif component == "idempotency":
                outage.run(context, args.idempotency_keys)
            elif component == "resolver":
                resolver.run(context)
            elif component == "schemathesis":
                problem = schema.available()
                if problem:
                    tally.violation("schemathesis", "schemathesis unavailable", "import schemathesis", problem)
                    continue
                schema.run(campaign, seed, args.schemathesis_examples, args.seconds, relay.directory)
            elif component == "mutation":
                mutation.run(campaign, seed, args.cases if args.cases or not args.seconds else None, args.seconds)
            elif component == "edges":
                edges.run(campaign)
            elif component == "framing":
                framing.run(campaign)
            elif component == "auth":
                auth.run(campaign)
            print(f"fuzz: {component} done in {time.monotonic() - began:.1f} s ({tally.cases[component]} cases)", flush=True)
    finally:
        # Every send the relay finished (sent, failed or refused before APNs)
        # is counted once in apns_relay_sends_total and has one row: read
        # before the drain, compared once the rows are in (one process only:
        # a restart starts the counters again).
        sends_counted = relay.metric_sum("apns_relay_sends_total") if relay.alive() and relay.starts == 1 else None
        # With Postgres up, the writer writes every row (none spooled): its
        # counter of written rows reaches the sends' while serve still runs.
        written = None
        if sends_counted is not None and relay.database_url:
            written_now = lambda: relay.metric_sum("apns_relay_audit_rows_total", where='result="written"')
            wait_until(lambda: written_now() == sends_counted, 30)
            written = written_now()
        exit_status = relay.stop()
    if exit_status not in (0, None):
        tally.violation("relay", "unclean exit after SIGTERM", "drain", f"exit status {exit_status}; log: {relay.log_tail(3)}")

    figures = audit.check(relay.database_url, relay.instance, tally.answered) if relay.database_url else None
    if relay.database_url and sends_counted is not None:
        rows = relay.rows_of_instance()
        print(f"fuzz: sum(apns_relay_sends_total) {sends_counted:.0f} and apns_relay_audit_rows_total{{result=\"written\"}} {'none' if written is None else f'{written:.0f}'} "
              f"before the drain, {rows} audit rows of the instance after it", flush=True)
        if written != sends_counted:
            tally.violation("relay", "counters disagree with rows", "apns_relay_audit_rows_total{result=\"written\"} against apns_relay_sends_total",
                            f"{written} rows counted written for {sends_counted:.0f} sends counted, 30 s after the campaign's last answer")
        if rows != sends_counted:
            tally.violation("relay", "counters disagree with rows", "apns_relay_sends_total against apns_audit",
                            f"sum(apns_relay_sends_total) = {sends_counted:.0f} before the drain, {rows} audit rows of the instance after it")
    report(tally, figures, args.show, time.monotonic() - started)
    write_violations(relay.directory / "violations.txt", tally, figures)
    failed = bool(tally.violations or tally.crashes or (figures and (figures.missing or figures.duplicates)))
    if args.keep or failed:
        print(f"fuzz: work directory kept: {relay.directory} (every violation in violations.txt)")
    else:
        shutil.rmtree(relay.directory, ignore_errors=True)
    return 1 if failed else 0


def write_violations(path, tally, figures):
    with open(path, "w", encoding="utf-8") as handle:
        for component, case, detail in tally.crashes:
            handle.write(f"CRASH\t{component}\t{case}\t{detail}\n")
        for component, kind, case, detail in tally.violations:
            handle.write(f"FAIL\t{component}\t{kind}\t{case}\t{detail}\n")
        for component, kind, case, detail in tally.known:
            handle.write(f"KNOWN\t{component}\t{kind}\t{case}\t{detail.replace(chr(10), ' ')}\n")
        for apns_id, answers, rows in (figures.missing + figures.duplicates) if figures else []:
            handle.write(f"AUDIT\t{apns_id}\tanswered {answers}\trows {rows}\n")


def report(tally, figures, show, elapsed):
    print("fuzz: per component:")
    for line in tally.by_component():
        print(line)
    for component, case, detail in tally.crashes:
        print(f"CRASH  {component}: {case}\n       {detail}")
    for component, kind, case, detail in tally.violations[:show]:
        print(f"FAIL   {component}: {kind}: {case}\n       {detail}")
    if len(tally.violations) > show:
        print(f"...    {len(tally.violations) - show} more violations (--show N prints more)")
    for component, kind, case, detail in tally.known[:show]:
        print(f"KNOWN  {component}: {kind}: {case}\n       {detail}")
    if figures:
        for apns_id, answers, rows in (figures.missing + figures.duplicates)[:show]:
            print(f"AUDIT  apns-id {apns_id}: answered {answers}×, {rows} rows")
    if tally.figures:
        print("fuzz: fault components:")
        for component, text in tally.figures:
            failed = any(c == component for c, _, _, _ in tally.violations)
            print(f"  {'FAIL' if failed else 'ok  '} {component:<12} {text}")
    total = sum(tally.cases.values())
    server = tally.count(verdicts.SERVER_ERROR)
    non_json = tally.count(verdicts.NON_JSON) + tally.count(verdicts.BAD_ENVELOPE)
    other = len(tally.violations) - server - non_json
    audit_text = (f"answered={figures.answered} rows={figures.rows} missing={len(figures.missing)} duplicates={len(figures.duplicates)}"
                  if figures else "audit not checked (no --database-url)")
    print(f"fuzz: {total} cases, {len(tally.crashes)} crashes, {server} server errors for client errors, "
          f"{non_json} non-JSON errors, {other} other violations, {audit_text}; "
          f"{len(tally.known)} known library limits ({elapsed:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
