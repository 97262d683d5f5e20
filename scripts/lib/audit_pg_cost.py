#!/usr/bin/env python3
"""Postgres' own CPU per audit row: COPY of the writer's exact lines into apns_audit.

Measures what the audit costs the database, apart from the relay: the cluster's
processes' user + system CPU (from /proc) over a load of --rows rows, divided by
the rows. Each variant gets a fresh database (the migrated schema, plus the
variant's SQL), a prefill of --prefill rows (unmeasured: the indexes are not
empty in production), a CHECKPOINT, then the measured load: --rows rows in
COPYs of --batch rows (one transaction each, as the writer sends them), in one
psql session, followed by a CHECKPOINT (the dirty pages the load left are its
cost too). Variants alternate within each round; medians over --rounds.

CPU is counted for every process of the cluster: the live ones (utime + stime)
plus the postmaster's cutime + cstime, which holds the CPU of every child it
reaped (the psql session's backend, autovacuum workers), so nothing that ran
and exited during the window is lost.

    scripts/audit-pg-cost                      # every variant (see --list)
    scripts/audit-pg-cost --variants base,no_latency --rows 100000 --rounds 3
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Each variant: (SQL run after the migrations in its database, COPY format, rows' id rewritten time-ordered?)
VARIANTS = {
    # The schema as migrated today.
    "base": ("", "text", False),
    # The indexes before migration 0006: B-trees for the apns-id and token look-ups, every latency indexed.
    "before_0006": ("""
        DROP INDEX apns_audit_apns_id, apns_audit_token, apns_audit_app_latency;
        CREATE INDEX apns_audit_apns_id ON apns_audit (apns_id);
        CREATE INDEX apns_audit_token ON apns_audit (token_fingerprint, recorded_at DESC) WHERE token_fingerprint IS NOT NULL;
        CREATE INDEX apns_audit_latency ON apns_audit (latency_ms DESC, recorded_at);
        """, "text", False),
    # The latency indexes before migration 0011: sends of a second or more only, by latency and by app.
    "before_0011": ("""
        DROP INDEX apns_audit_app_latency;
        CREATE INDEX apns_audit_slow ON apns_audit (latency_ms DESC, recorded_at) WHERE latency_ms >= 1000;
        CREATE INDEX apns_audit_slow_app ON apns_audit (app, latency_ms DESC, recorded_at) WHERE latency_ms >= 1000;
        """, "text", False),
    # The same rows in COPY's binary format (parsing cost).
    "binary": ("", "binary", False),
    # One index at a time left out, to price each.
    "no_pkey": ("ALTER TABLE apns_audit DROP CONSTRAINT apns_audit_pkey;", "text", False),
    "no_apns_id": ("DROP INDEX apns_audit_apns_id;", "text", False),
    "no_token": ("DROP INDEX apns_audit_token;", "text", False),
    "no_app_time": ("DROP INDEX apns_audit_app_time;", "text", False),
    "no_time": ("DROP INDEX apns_audit_time;", "text", False),
    "no_latency": ("DROP INDEX apns_audit_app_latency;", "text", False),
    # Heap only: COPY parsing, the heap, WAL, partition routing.
    "no_indexes": ("""
        ALTER TABLE apns_audit DROP CONSTRAINT apns_audit_pkey;
        DROP INDEX apns_audit_apns_id, apns_audit_token, apns_audit_app_time, apns_audit_time, apns_audit_app_latency,
                   apns_audit_traps, apns_audit_retried, apns_audit_failed, apns_audit_trap_time;
        """, "text", False),
    # The row id time-ordered (a UUIDv7-shaped id from recorded_at): primary-key inserts at the right edge.
    "ordered_id": ("", "text", True),
    # recorded_at's btree as a BRIN.
    "time_brin": ("DROP INDEX apns_audit_time; CREATE INDEX apns_audit_time ON apns_audit USING brin (recorded_at) "
                  "WITH (pages_per_range = 32, autosummarize = on);", "text", False),
}


def log(message):
    print(f"[audit-pg-cost] {message}", file=sys.stderr, flush=True)


def psql(url, sql=None, file=None):
    command = ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url]
    command += ["-c", sql] if sql is not None else ["-f", file]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"psql failed ({done.returncode}) on {sql or file!r}:\n{done.stderr.strip()}")
    return done.stdout.strip()


def with_database(url, name):
    """The URL of another database on the same cluster."""
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + (("?" + query) if query else "")


class Cluster:
    """CPU time of every process of one Postgres cluster, from /proc."""

    def __init__(self, url):
        data = psql(url, "SHOW data_directory")
        with open(os.path.join(data, "postmaster.pid")) as pid_file:
            self.postmaster = int(pid_file.readline())
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _stat(pid):
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
        return text[text.rindex(")") + 2:].split()  # fields from 3 (state) on

    def cpu_seconds(self):
        """Live processes' utime + stime, plus the postmaster's reaped children's."""
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                fields = self._stat(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            ppid = int(fields[1])
            if pid == self.postmaster:
                total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
            elif ppid == self.postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / self.tick


def ordered_id(line):
    """The line with its id (first field) replaced by a UUIDv7-shaped one from
    its recorded_at (second field) and the old id's random bits."""
    old, recorded, rest = line.split("\t", 2)
    # recorded_at as written: 2026-11-24T05:10:07.123456Z; milliseconds since the epoch.
    from datetime import datetime
    moment = datetime.fromisoformat(recorded.replace("Z", "+00:00"))
    millis = int(moment.timestamp() * 1000)
    bits = old.replace("-", "")
    hex_ = f"{millis:012x}" + "7" + bits[13:16] + bits[16:32]
    new = f"{hex_[0:8]}-{hex_[8:12]}-{hex_[12:16]}-{hex_[16:20]}-{hex_[20:32]}"
    return "\t".join((new, recorded, rest))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Required for a measurement; --list needs neither (checked below).
    parser.add_argument("--binary", help="apns-relay (debug or release): writes the rows and migrates")
    parser.add_argument("--database-url", help="a database on a throwaway cluster (superuser): variants get databases beside it")
    parser.add_argument("--rows", type=int, default=200_000, help="measured rows per load")
    parser.add_argument("--prefill", type=int, default=200_000, help="rows loaded before each measured load, unmeasured")
    parser.add_argument("--batch", type=int, default=500, help="rows per COPY (the writer's default batch size)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="base,before_0006,binary,no_pkey,no_apns_id,no_token,no_app_time,no_time,no_latency,no_indexes")
    parser.add_argument("--sql", action="append", default=[], metavar="NAME=SQL",
                        help="an extra variant: SQL run after the migrations (text COPY); repeatable")
    parser.add_argument("--list", action="store_true", help="print the built-in variants and exit")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    for extra in args.sql:
        name, _, sql = extra.partition("=")
        variants[name] = (sql, "text", False)
    if args.list:
        for name, (sql, format_, ordered) in VARIANTS.items():
            print(f"{name}: {format_} COPY{', time-ordered ids' if ordered else ''}{'; ' + ' '.join(sql.split()) if sql else ''}")
        return
    missing = [option for option, value in (("--binary", args.binary), ("--database-url", args.database_url)) if not value]
    if missing:
        parser.error(f"{' and '.join(missing)} required (only --list runs without them)")
    chosen = [v for v in args.variants.split(",") if v]
    unknown = [v for v in chosen if v not in variants]
    if unknown:
        sys.exit(f"unknown variants {unknown}; known: {sorted(variants)}")

    work = tempfile.mkdtemp(prefix="audit-pg-cost-")
    os.chmod(work, 0o755)
    try:
        measure(args, variants, chosen, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args, variants, chosen, work):
    """Every round of every chosen variant, then the medians."""
    total = args.prefill + args.rows
    log(f"writing {total:,} rows with {args.binary}")
    lines_path = os.path.join(work, "rows.copy")
    columns = subprocess.run([args.binary, "bench", "audit", "--rows", str(total), "--rows-out", lines_path],
                             check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with open(lines_path) as f:
        lines = f.read().splitlines(keepends=True)
    assert len(lines) == total, (len(lines), total)

    def batches(rows, prefix):
        paths = []
        for number, start in enumerate(range(0, len(rows), args.batch)):
            path = os.path.join(work, f"{prefix}-{number}.copy")
            with open(path, "w") as f:
                f.writelines(rows[start:start + args.batch])
            paths.append(path)
        return paths

    files = {False: (batches(lines[:args.prefill], "prefill"), batches(lines[args.prefill:], "rows"))}
    if any(variants[v][2] for v in chosen):
        ordered = [ordered_id(line) for line in lines]
        files[True] = (batches(ordered[:args.prefill], "oprefill"), batches(ordered[args.prefill:], "orows"))

    cluster = Cluster(args.database_url)
    template = "audit_pg_cost_template"
    admin = args.database_url
    psql(admin, f"DROP DATABASE IF EXISTS {template}")
    psql(admin, f"CREATE DATABASE {template}")
    subprocess.run([args.binary, "migrate", "--database-url", with_database(admin, template)], check=True, capture_output=True)

    # Binary COPY files: the same rows, converted once by Postgres itself.
    if any(variants[v][1] == "binary" for v in chosen):
        scratch = with_database(admin, template)
        psql(scratch, "CREATE TABLE rows_binary (LIKE apns_audit)")
        for path in files[False][1]:
            psql(scratch, f"\\copy rows_binary ({columns}) FROM '{path}'")
            psql(scratch, f"\\copy (SELECT {columns} FROM rows_binary) TO '{path}.bin' WITH (FORMAT binary)")
            psql(scratch, "TRUNCATE rows_binary")
        psql(scratch, "DROP TABLE rows_binary")

    results = {v: [] for v in chosen}
    for round_ in range(args.rounds):
        order = chosen if round_ % 2 == 0 else list(reversed(chosen))
        for variant in order:
            sql, format_, ordered = variants[variant]
            name = f"audit_pg_cost_{variant}"
            psql(admin, f"DROP DATABASE IF EXISTS {name}")
            psql(admin, f"CREATE DATABASE {name} TEMPLATE {template}")
            url = with_database(admin, name)
            psql(url, "SELECT apns_audit_ensure_partitions(current_date - 1, 3)")
            if sql:
                psql(url, sql)
            prefill, measured = files[ordered]
            script = os.path.join(work, "prefill.sql")
            with open(script, "w") as f:
                f.writelines(f"\\copy apns_audit ({columns}) FROM '{path}'\n" for path in prefill)
            if prefill:
                psql(url, file=script)
            psql(url, "VACUUM ANALYZE apns_audit")
            psql(url, "CHECKPOINT")
            with open(script, "w") as f:
                option = " WITH (FORMAT binary)" if format_ == "binary" else ""
                suffix = ".bin" if format_ == "binary" else ""
                f.writelines(f"\\copy apns_audit ({columns}) FROM '{path}{suffix}'{option}\n" for path in measured)
            time.sleep(0.5)
            before = cluster.cpu_seconds()
            started = time.monotonic()
            psql(url, file=script)
            loaded = time.monotonic() - started
            after_load = cluster.cpu_seconds()
            psql(url, "CHECKPOINT")
            time.sleep(0.5)  # the CHECKPOINT session's backend exits and is reaped
            after = cluster.cpu_seconds()
            count = int(psql(url, "SELECT count(*) FROM apns_audit"))
            assert count == total, f"{variant}: {count} rows, expected {total}"
            per_row = (after - before) / args.rows * 1e6
            results[variant].append((per_row, (after_load - before) / args.rows * 1e6, args.rows / loaded))
            log(f"round {round_ + 1} {variant}: {per_row:.1f} us/row with the checkpoint, "
                f"{(after_load - before) / args.rows * 1e6:.1f} during the COPYs, {args.rows / loaded:,.0f} rows/s")
            psql(admin, f"DROP DATABASE {name}")
    psql(admin, f"DROP DATABASE {template}")

    base = statistics.median(r[0] for r in results[chosen[0]])
    print(f"Postgres CPU per audit row: {args.rows:,} rows after {args.prefill:,}, COPYs of {args.batch:,}, "
          f"{args.rounds} rounds, medians (load average {os.getloadavg()[0]:.1f})")
    for variant in chosen:
        total_us = statistics.median(r[0] for r in results[variant])
        copy_us = statistics.median(r[1] for r in results[variant])
        rate = statistics.median(r[2] for r in results[variant])
        spread = " ".join(f"{r[0]:.1f}" for r in results[variant])
        print(f"figure postgres us/row {variant}: {total_us:.1f} us  (COPYs {copy_us:.1f} us; {rate:,.0f} rows/s; "
              f"{total_us - base:+.1f} vs {chosen[0]}; rounds {spread})")


if __name__ == "__main__":
    main()
