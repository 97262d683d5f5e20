#!/usr/bin/env python3
"""The relay's send path measured from outside its process (issue 15).

The mock APNs (`apns-relay mock-apns`), Postgres, the load generators
(`apns-relay bench load`, wrk, aioapns, h2load) and the relay
(`apns-relay serve`) each run as processes of their own, so the relay's cost
can be read on its own: sends/s, and the relay's CPU time per send (utime +
stime from /proc/PID/stat before and after the measured window, divided by
the sends the relay counted as finished successfully in /metrics).

Every figure is printed as `figure <name>: <value> <unit>` (one per line,
machine-readable; `reference` lines name what it is compared with), and each
section prints its ratio against a reference measured in the same run.

    scripts/lib/send_bench.py --binary .build/release/apns-relay --database-url URL [--quick] [--sections agree,production,...]
"""
import argparse, glob, json, os, re, resource, shutil, statistics, subprocess, sys, tempfile, threading, time, urllib.request

from audit_pg_cost import Cluster, psql, with_database
from bench_relay import add_apns_ingress, write_relay_config, write_shipped_config
import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_ROUNDS = 5  # the defaults section: alternating rounds of each configuration

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REFERENCE_ROUNDS = 3  # the CPU-per-send ratio against --reference-binary: alternating rounds
SECTIONS = ["defaults", "agree", "production", "connections", "batches", "payloads", "million", "audit", "writer", "peers", "h2ingress"]
API_KEY = "bench-key-0123456789"
APP = "app-a"


def log(message):
    print(f"--> {message}", file=sys.stderr, flush=True)


PRINTED = []  # every figure line, for --smoke's check


def figure(name, value, unit="", note=""):
    """One parseable figure line: `figure NAME: VALUE UNIT  (NOTE)`."""
    text = f"{value:.4g}" if isinstance(value, float) and abs(value) < 10 else (f"{value:,.0f}" if isinstance(value, (int, float)) else str(value))
    # `.4g` writes a value near zero (a difference of two equal medians,
    # -1.1e-13) with an exponent, which no figure line may hold.
    if "e" in text:
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        if text in ("", "-0"): text = "0"
    line = f"figure {name}: {text}{(' ' + unit) if unit else ''}{('  (' + note + ')') if note else ''}"
    PRINTED.append(line)
    print(line, flush=True)


FIGURE_LINE = re.compile(r"^figure (?P<name>[^:]+(?::[^:]+)?): (?P<values>-?[\d,.]+(?: -?[\d,.]+)*)(?: [A-Za-z/%]+(?: [a-z]+)*)?(?:  \(.*\))?$")


def parse_figure(line):
    """(name, [numbers]) of a figure line, or None when it does not parse."""
    m = FIGURE_LINE.match(line)
    if not m: return None
    try: return m.group("name"), [float(v.replace(",", "")) for v in m.group("values").split()]
    except ValueError: return None


def process_cpu_seconds(pid):
    """utime + stime of one live process (all its threads; fields 14 and 15 of
    /proc/PID/stat). A process that is gone raises: a measurement without it is no figure."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_stats(pid):
    """Per thread of one live process: its name, user and system ticks,
    voluntary and involuntary switches, minor page faults (/proc/PID/task/*)."""
    found = {}
    for directory in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(directory + "/comm") as f: name = f.read().strip()
            with open(directory + "/stat") as f: fields = f.read().rsplit(")", 1)[1].split()
            with open(directory + "/status") as f: status = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        voluntary = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
        involuntary = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
        found[directory.rsplit("/", 1)[1]] = (name, int(fields[11]), int(fields[12]), voluntary, involuntary, int(fields[7]))
    return found


def thread_seconds(pid):
    """CPU seconds (user + system) of each thread group of one live process,
    by thread name (Swift's pool threads share one): where a configuration's
    CPU went, thread by thread."""
    groups = {}
    for name, user, system, *_ in thread_stats(pid).values():
        groups[name] = groups.get(name, 0.0) + (user + system) / CLOCK_TICKS
    return groups


def thread_share(name):
    """The part of the relay a thread name belongs to, for the audit share's breakdown."""
    if name in ("relay-audit", "relay-journal"): return "audit threads"
    if "qos" in name: return "Swift's pool"
    if name.startswith("MHD"): return "ingress thread"
    return "other threads"


class PostgresLoad:
    """Keeps the audit's database as busy as a relay's audit writer keeps it,
    for a relay with the audit off: the writer's own COPY lines (`apns-relay
    bench audit --rows-out`) at `rate` rows/s, one COPY every 50 ms (the
    writer's flush interval), through one psql session. Beside "audit,
    quiet", the relay then differs from it only by its own audit work, not by
    the Postgres it shares two cores with."""

    INTERVAL = 0.05

    def __init__(self, database_url, columns, lines, rate):
        self.columns, self.lines, self.rate = columns, lines, rate
        self.written = 0
        self.process = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", database_url], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        started = time.monotonic()
        while not self.stopping.is_set():
            due = min(len(self.lines), int((time.monotonic() - started) * self.rate))
            if due > self.written:
                self.process.stdin.write(f"COPY apns_audit ({self.columns}) FROM STDIN;\n")
                self.process.stdin.writelines(self.lines[self.written:due])
                self.process.stdin.write("\\.\n")
                self.process.stdin.flush()
                self.written = due
            self.stopping.wait(self.INTERVAL)

    def stop(self):
        """Stops feeding, waits for psql to finish what it was given; the rows written."""
        self.stopping.set()
        self.thread.join()
        self.process.stdin.close()
        error = self.process.stderr.read()
        if self.process.wait() != 0:
            sys.exit(f"send_bench: the Postgres load's psql failed: {error.strip()}")
        if self.written >= len(self.lines):
            log("  the Postgres load ran out of rows: its rate fell short at the end")
        return self.written


class Mock:
    """`apns-relay mock-apns` in a process of its own (launcher.start_mock)."""

    def __init__(self, binary, work, key, delay_ms=0, streams=1000):
        self.child = launcher.start_mock(binary, ["--key", f"BENCHKEY01:BENCHTEAM1:{key}", "--delay-ms", delay_ms,
                                                  "--max-concurrent-streams", streams, "--certificate-directory", work])
        self.process = self.child.process
        self.port = self.child.port
        self.cert = self.child.certificate

    def stop(self):
        self.child.stop(timeout=30)


class Relay:
    """`apns-relay serve` in a process of its own, audit to Postgres (or off)."""

    def __init__(self, binary, work, key, mock, database_url, audit=True, connections_per_origin=2, extra_ingress="", shipped=None,
                 environment=None, configure=None):
        """`shipped`: None for the benchmarks' own quiet configuration (logs at
        error), else a dict of write_shipped_config's options (log_level,
        tracing): the shipped example configuration, its log lines written to
        a file in `work` as a log collector would take them. `configure`, if
        given, is called with the configuration file's path before the relay
        starts (the h2ingress section turns on `apns_ingress:` with it)."""
        self.work = work
        self.mock = mock
        self.audit = audit and bool(database_url)
        self.database_url = database_url if self.audit else None
        spool = tempfile.mkdtemp(prefix="spool-", dir=work)
        config = os.path.join(work, "relay.yaml")
        database = database_url if audit and database_url else ""
        if shipped is None:
            write_relay_config(config, instance="send-bench", mock_port=mock.port, ca_file=mock.cert, key_path=key, api_key=API_KEY,
                               spool_directory=spool, database_url=database, ingress_lines=extra_ingress,
                               connections_per_origin=connections_per_origin, drain_timeout_seconds=10)
        else:
            write_shipped_config(config, root=ROOT, instance="send-bench", mock_port=mock.port, ca_file=mock.cert, key_path=key,
                                 api_key=API_KEY, spool_directory=spool, database_url=database, **shipped)
        if configure: configure(config)
        self.log_path = os.path.join(work, "relay.log")
        self.logs = shipped is not None
        self.child = launcher.start_serve(binary, config, [] if audit else ["--benchmark-without-audit"],
                                          log_path=self.log_path if self.logs else None, environment=environment)
        self.process = self.child.process
        self.port = self.child.port
        self.metrics_port = self.child.metrics_port

    def cpu_seconds(self):
        return process_cpu_seconds(self.process.pid)

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30) as r:
            return r.read().decode()

    def metric_sum(self, name, text=None, where=""):
        total = 0.0
        for line in (text or self.metrics()).splitlines():
            if line.startswith(name) and (line[len(name)] in " {") and where in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def succeeded_sends(self):
        return self.metric_sum("apns_relay_sends_total", where='outcome="success"')

    def log_bytes(self):
        """What the relay has written to its log file so far (0 without one)."""
        return os.path.getsize(self.log_path) if self.logs else 0

    def stop(self):
        self.child.stop(timeout=120)
        if self.logs:
            os.unlink(self.log_path)


class OTLPReceiver:
    """scripts/lib/otlp_receiver.py, a live OTLP/HTTP collector (OpenTelemetry's
    own protobuf classes), its spans decoded and written to /dev/null. It
    keeps connections alive, as OpenTelemetry's Collector does; with
    `keep_alive=False` it closes each one after its answer (HTTP/1.0), and
    the relay opens a TCP connection for every batch."""

    def __init__(self, keep_alive=True):
        arguments = [sys.executable, os.path.join(ROOT, "scripts/lib/otlp_receiver.py"), os.devnull]
        if keep_alive: arguments.append("--keep-alive")
        self.process = subprocess.Popen(arguments, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        m = re.search(r"otlp-receiver on (\d+)", line)
        if not m: sys.exit(f"otlp_receiver.py did not start: {line!r}")
        self.endpoint = f"http://127.0.0.1:{m.group(1)}"

    def stop(self):
        self.process.terminate()
        try: self.process.wait(timeout=30)
        except subprocess.TimeoutExpired: self.process.kill()


class Bench:
    def __init__(self, args):
        self.args = args
        self.binary = args.binary
        self.work = tempfile.mkdtemp(prefix="apns-relay-send-bench-")
        self.key = os.path.join(self.work, "AuthKey_BENCHKEY01.p8")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", self.key], check=True, capture_output=True)
        self.token_offset = 0
        self.clusters = {}  # database URL -> audit_pg_cost.Cluster or None (postgres_cluster)
        self.q = args.quick or args.smoke
        self.smoke = args.smoke

    def tokens(self, count):
        """A fresh range of token numbers: no run repeats another's devices."""
        first = self.token_offset
        self.token_offset += count + 1000
        return first

    def load(self, relay, sends, connections=8, batch=0, payload=0, generator=None):
        """The built-in load generator (of `generator`, a release apns-relay, or
        this bench's binary); returns its figures as a dict."""
        out = subprocess.run(
            [generator or self.binary, "bench", "load", "--port", str(relay.port), "--api-key", API_KEY, "--app", APP, "--connections", str(connections),
             "--sends", str(sends), "--batch-size", str(batch), "--payload-bytes", str(payload), "--token-offset", str(self.tokens(sends))],
            check=True, capture_output=True, text=True).stdout
        line = next(l for l in out.splitlines() if l.startswith("load: "))
        return {k: float(v) for k, v in (f.split("=") for f in line[6:].split())}

    def measured(self, relay, run, watch_postgres=False):
        """Runs `run()` between two reads of the relay's CPU time and success
        counter. Also reads, per send, the CPU of the other processes on the
        machine that the sends cost: the mock APNs, the Postgres processes of
        the audit database, and the load generators `run()` started and
        waited for (RUSAGE_CHILDREN), so a rate that is CPU-bound shows
        where the two cores went."""
        cluster = self.postgres_cluster(relay.database_url or self.args.database_url) if relay.audit or watch_postgres else None
        def others():
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (process_cpu_seconds(relay.mock.process.pid), cluster.cpu_seconds() if cluster else 0.0,
                    children.ru_utime, children.ru_stime)
        sends_before, cpu_before, others_before = relay.succeeded_sends(), relay.cpu_seconds(), others()
        threads_before = thread_seconds(relay.process.pid)
        started = time.monotonic()
        result = run()
        elapsed = time.monotonic() - started
        cpu, sends = relay.cpu_seconds() - cpu_before, relay.succeeded_sends() - sends_before
        threads_after = thread_seconds(relay.process.pid)
        if cluster: time.sleep(0.3)  # the writer's last partial batch (flushed every 50 ms) reaches Postgres
        mock_cpu, postgres_cpu, load_user, load_system = (after - before for after, before in zip(others(), others_before))
        load_cpu = load_user + load_system
        per_send = 1e6 / max(sends, 1)
        result.update(relay_sends=sends, relay_cpu=cpu, cpu_us=cpu * per_send, window=elapsed, rss=relay.rss_mib(),
                      mock_us=mock_cpu * per_send, postgres_us=postgres_cpu * per_send, load_us=load_cpu * per_send,
                      load_user_us=load_user * per_send, load_sys_us=load_system * per_send,
                      machine_us=(cpu + mock_cpu + postgres_cpu + load_cpu) * per_send)
        parts = {}
        for name, seconds in threads_after.items():
            part = thread_share(name)
            parts[part] = parts.get(part, 0.0) + (seconds - threads_before.get(name, 0.0)) * per_send
        result["parts_us"] = parts
        return result

    def postgres_cluster(self, database_url):
        """The local Postgres cluster behind `database_url` (its processes'
        CPU, reaped children included: audit_pg_cost.Cluster), or None when
        this user cannot read it; looked up once per URL."""
        cache = self.clusters
        if database_url not in cache:
            try:
                cache[database_url] = Cluster(database_url)
            except (SystemExit, OSError, ValueError) as error:  # not a local cluster this user can read
                log(f"  Postgres CPU not measured: {error}")
                cache[database_url] = None
        return cache[database_url]

    @staticmethod
    def machine_note(run):
        """The CPU per send of every process the sends cost, and the rate two cores allow at that cost."""
        return (f"relay {run['cpu_us']:.0f} + mock {run['mock_us']:.0f} + postgres {run['postgres_us']:.0f} + load {run['load_us']:.0f} us; "
                f"two cores allow {2e6 / max(run['machine_us'], 1e-9):,.0f} sends/s at this cost")

    def wrk(self, relay, seconds, connections=8):
        """wrk with a Lua script posting single sends, a new token for each."""
        script = os.path.join(self.work, "send.lua")
        first = self.tokens(2_000_000)
        with open(script, "w") as f:
            f.write(WRK_SCRIPT.replace("FIRST", str(first)).replace("API_KEY", API_KEY).replace("APP", APP).replace("SNAPSHOT", LIVE_SNAPSHOT))
        out = subprocess.run(["wrk", "-t", str(min(2, connections)), "-c", str(connections), "-d", f"{seconds}s", "--latency", "-s", script,
                              f"http://127.0.0.1:{relay.port}/v1/send"], check=True, capture_output=True, text=True).stdout
        requests = int(re.search(r"(\d+) requests in", out).group(1))
        non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
        duration = float(re.search(r"requests in ([\d.]+)s", out).group(1))
        return {"requests": requests, "failed_requests": non2xx, "sends_per_s": (requests - non2xx) / duration, "p50": parse_wrk_latency(out, "50%"),
                "p99": parse_wrk_latency(out, "99%")}

    def relay(self, mock, audit=True, **options):
        return Relay(self.binary, tempfile.mkdtemp(prefix="relay-", dir=self.work), self.key, mock, self.args.database_url, audit=audit, **options)

    # --- sections ---------------------------------------------------------------------------------------------------

    def defaults(self):
        """The headline: the relay as users run it, the shipped example
        configuration (deploy/apns-relay.example.yaml, placeholders filled
        in: logs at info into a file, tracing.exporter log, the audit on), beside
        quieter variants of it, each a fresh relay, in alternating rounds:

          defaults        as shipped
          otlp            as shipped, tracing.exporter otlp to a live collector
                          that keeps its connections (as OpenTelemetry's does)
          otlp, collector closing   the same, to a collector that closes
                          each connection after its answer (HTTP/1.0): a
                          TCP connection a batch (not a target; beside it)
          audit, quiet    logs at error, tracing none, audit on
          quiet           logs at error, tracing none, audit off
          quiet, Postgres busy   quiet, while psql COPYs the writer's own
                          lines into the audit table at the latest "audit,
                          quiet" run's rows/s (PostgresLoad)

        Relay CPU per send (from /proc) is the figure; the three ratios are
        issue 26's targets: defaults / quiet <= 1.3, otlp / defaults <= 1.1,
        and the audit's share (audit, quiet minus quiet) <= 10 us per send.
        Beside the share: its parts by thread (the audit's threads, Swift's
        pool, the ingress thread, the rest), Postgres' CPU per send, and the
        audit's own share against "quiet, Postgres busy" (the same machine
        load without the relay's audit work), with both runs' Postgres load."""
        rounds = 1 if self.smoke else 2 if self.q else DEFAULT_ROUNDS
        sends = 500 if self.smoke else 4000 if self.q else 30000
        connections = 16
        log(f"defaults: the shipped example configuration beside quieter variants, {rounds} alternating rounds of {sends} single sends, "
            f"{connections} connections, the built-in load generator")
        configurations = [
            ("defaults", dict(shipped={}, audit=True)),
            ("otlp", dict(shipped={"tracing": {"exporter": "otlp"}}, audit=True, otlp=True)),
            ("otlp, collector closing", dict(shipped={"tracing": {"exporter": "otlp"}}, audit=True, otlp=True, closing_collector=True)),
            ("audit, quiet", dict(shipped={"log_level": "error", "tracing": {"exporter": "none"}}, audit=True)),
            ("quiet", dict(shipped={"log_level": "error", "tracing": {"exporter": "none"}}, audit=False)),
            # Quiet, with Postgres kept as busy as "audit, quiet" kept it.
            ("quiet, Postgres busy", dict(shipped={"log_level": "error", "tracing": {"exporter": "none"}}, audit=False, postgres_busy=True)),
        ]
        results = {name: [] for name, _ in configurations}
        # The writer's own lines for the Postgres load, enough for every round.
        rows_path = os.path.join(self.work, "postgres-load.copy")
        listed = subprocess.run([self.binary, "bench", "audit", "--rows", str(rounds * (sends + 20000)), "--rows-out", rows_path],
                                check=True, capture_output=True, text=True).stdout.strip().splitlines()
        columns = listed[-1]
        with open(rows_path) as f:
            load_rows = f.read().splitlines(keepends=True)
        mock = Mock(self.binary, self.work, self.key)
        try:
            for round_ in range(rounds):
                order = configurations if round_ % 2 == 0 else list(reversed(configurations))
                for name, options in order:
                    receiver = OTLPReceiver(keep_alive=not options.get("closing_collector")) if options.get("otlp") else None
                    environment = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint} if receiver else None
                    relay = Relay(self.binary, tempfile.mkdtemp(prefix="relay-", dir=self.work), self.key, mock, self.args.database_url,
                                  audit=options["audit"], shipped=options["shipped"], environment=environment)
                    try:
                        self.load(relay, 200 if self.smoke else 2000, connections=connections)
                        log_before = relay.log_bytes()
                        postgres_load = None
                        if options.get("postgres_busy"):
                            # At the rows/s of the latest "audit, quiet" run (earlier in this round, or the last round's).
                            rate = results["audit, quiet"][-1]["sends_per_s"]
                            postgres_load = PostgresLoad(self.args.database_url, columns, load_rows, rate)
                        try:
                            run = self.measured(relay, lambda: self.load(relay, sends, connections=connections),
                                                watch_postgres=postgres_load is not None)
                        finally:
                            if postgres_load:
                                written = postgres_load.stop()
                                load_rows = load_rows[written:]
                        run["log_bytes_per_send"] = (relay.log_bytes() - log_before) / max(run["relay_sends"], 1)
                        run["spans_dropped"] = relay.metric_sum("apns_relay_spans_dropped_total")
                    finally:
                        relay.stop()
                        if receiver: receiver.stop()
                    results[name].append(run)
                figure(f"defaults round {round_ + 1}: relay CPU per send", " ".join(f"{results[n][-1]['cpu_us']:.1f}" for n, _ in configurations), "us",
                       " / ".join(n for n, _ in configurations))
        finally:
            mock.stop()
        def median(name, key="cpu_us"): return statistics.median(r[key] for r in results[name])
        def spread(values): return f"{min(values):.3g}-{max(values):.3g} over {len(values)} rounds"
        for name, _ in configurations:
            rounds_text = " ".join(f"{r['cpu_us']:.1f}" for r in results[name])
            figure(f"relay CPU per send, {name}", median(name), "us",
                   f"median; rounds {rounds_text}; "
                   f"{median(name, 'sends_per_s'):,.0f} sends/s; log {median(name, 'log_bytes_per_send'):.0f} B per send")
        defaults_over_quiet = [d["cpu_us"] / q["cpu_us"] for d, q in zip(results["defaults"], results["quiet"])]
        otlp_over_defaults = [o["cpu_us"] / d["cpu_us"] for o, d in zip(results["otlp"], results["defaults"])]
        audit_share = [a["cpu_us"] - q["cpu_us"] for a, q in zip(results["audit, quiet"], results["quiet"])]
        figure("defaults / quiet, relay CPU per send", statistics.median(defaults_over_quiet), "",
               f"target <= 1.3; median, {spread(defaults_over_quiet)}; reference: quiet (logs at error, tracing none, audit off), same run")
        dropped = " ".join(f"{r['spans_dropped']:.0f}" for r in results["otlp"])
        figure("otlp / defaults, relay CPU per send", statistics.median(otlp_over_defaults), "",
               f"target <= 1.1; median, {spread(otlp_over_defaults)}; spans dropped in the otlp runs: {dropped}")
        closing_over_defaults = [o["cpu_us"] / d["cpu_us"] for o, d in zip(results["otlp, collector closing"], results["defaults"])]
        figure("otlp to a collector closing connections / defaults, relay CPU per send", statistics.median(closing_over_defaults), "",
               f"not a target (a TCP connection a batch); median, {spread(closing_over_defaults)}")
        figure("audit share of relay CPU per send (audit, quiet - quiet)", statistics.median(audit_share), "us",
               f"target <= 10 us; median, {spread(audit_share)}")
        # What the share was spent on, round by round: the audit's own
        # threads, and the threads that do the same work with the audit off
        # (the ingress thread above all), which run slower beside Postgres on
        # the same cores; and Postgres' own CPU per send in the audit rounds.
        part_names = ("audit threads", "Swift's pool", "ingress thread", "other threads")
        part_shares = {part: [a["parts_us"].get(part, 0.0) - q["parts_us"].get(part, 0.0)
                              for a, q in zip(results["audit, quiet"], results["quiet"])] for part in part_names}
        figure("audit share by thread: audit threads, pool, ingress thread, other",
               " ".join(f"{statistics.median(part_shares[part]):.1f}" for part in part_names), "us",
               "medians of the rounds' differences, audit, quiet - quiet; rounds: " + "; ".join(
                   " ".join(f"{part_shares[part][index]:.1f}" for part in part_names) for index in range(len(audit_share))))
        figure("Postgres CPU per send, audit rounds", median("audit, quiet", "postgres_us"), "us",
               "median; the audit's database on the same two cores (not the relay's CPU)")
        # The same share against a relay that shares the cores with an equally
        # busy Postgres: what the relay's own audit work costs it.
        own_share = [a["cpu_us"] - b["cpu_us"] for a, b in zip(results["audit, quiet"], results["quiet, Postgres busy"])]
        figure("audit's own share (audit, quiet - quiet with Postgres as busy)", statistics.median(own_share), "us",
               f"median, {spread(own_share)}; Postgres fed the writer's lines at the audit runs' rows/s by psql")
        def cores(run): return run["postgres_us"] * run["sends_per_s"] / 1e6
        figure("Postgres load, audit rounds / busy rounds", f"{statistics.median(cores(r) for r in results['audit, quiet']):.3f} "
               f"{statistics.median(cores(r) for r in results['quiet, Postgres busy']):.3f}", "cores", "medians; a core is 1")

    def agree(self):
        """Single sends, audit on: the built-in load generator and wrk against the same relay."""
        log("agree: built-in load generator vs wrk, POST /v1/send, 8 connections, audit on")
        mock = Mock(self.binary, self.work, self.key)
        relay = self.relay(mock)
        try:
            self.load(relay, 200 if self.smoke else 2000)  # warm-up: connections, JWT, allocator
            ours = self.measured(relay, lambda: self.load(relay, 500 if self.smoke else 4000 if self.q else 30000))
            seconds = 2 if self.smoke else max(3, round(ours["window"]))
            theirs = self.measured(relay, lambda: self.wrk(relay, seconds))
        finally:
            relay.stop(); mock.stop()
        figure("single sends/s, built-in load generator (audit on, 8 conn)", ours["sends_per_s"], "sends/s",
               f"p50 {ours['p50_ms']:.2f} ms, p99 {ours['p99_ms']:.2f} ms, {ours['failed_requests']:.0f} failed")
        figure("relay CPU per send, built-in load generator", ours["cpu_us"], "us", f"{ours['relay_cpu']:.2f} s CPU / {ours['relay_sends']:.0f} sends")
        figure("machine CPU per send, built-in load generator", ours["machine_us"], "us", self.machine_note(ours))
        figure("single sends/s, wrk (audit on, 8 conn)", theirs["sends_per_s"], "sends/s",
               f"p50 {theirs['p50']:.2f} ms, p99 {theirs['p99']:.2f} ms, {theirs['failed_requests']} non-2xx")
        figure("relay CPU per send, wrk", theirs["cpu_us"], "us", f"{theirs['relay_cpu']:.2f} s CPU / {theirs['relay_sends']:.0f} sends")
        figure("agreement sends/s (built-in / wrk)", ours["sends_per_s"] / theirs["sends_per_s"], "", "reference: wrk, same relay, same run")
        figure("agreement CPU/send (built-in / wrk)", ours["cpu_us"] / theirs["cpu_us"], "", "reference: wrk, same relay, same run")
        figure("load generator CPU per send, built-in / wrk", ours["load_us"] / max(theirs["load_us"], 1e-9), "",
               f"{ours['load_us']:.1f} / {theirs['load_us']:.1f} us (RUSAGE_CHILDREN over the sends the relay counted)")
        figure("target: single sends/s >= 15,000", ours["sends_per_s"] / 15000, "of target")
        self.reference_cpu(ours)

    def reference_cpu(self, ours):
        """The same single-send run through a reference build of the relay
        (--reference-binary, e.g. the commit before issue 15's work), same
        mock, same Postgres, same load generator: the CPU-per-send target
        (at most a third of the reference's) as a ratio measured in this run.

        One run of each build moves the ratio by a few hundredths with
        whatever else the machine does at that moment, so the builds take
        turns over `REFERENCE_ROUNDS` rounds (the first round's run of this
        build is the agree section's), each in a fresh relay, and the ratio
        is that of the medians; every round is printed."""
        if not self.args.reference_binary:
            print("note: relay CPU per send against a reference build not measured: give scripts/bench --reference REV "
                  "(or send_bench.py --reference-binary PATH)", flush=True)
            return
        sends = 500 if self.smoke else 4000 if self.q else 30000
        rounds = 1 if self.smoke else REFERENCE_ROUNDS
        def run(binary):
            mock = Mock(self.binary, self.work, self.key)
            relay = Relay(binary, tempfile.mkdtemp(prefix="relay-ref-", dir=self.work), self.key, mock, self.args.database_url)
            try:
                self.load(relay, 200 if self.smoke else 2000)
                return self.measured(relay, lambda: self.load(relay, sends))
            finally:
                relay.stop(); mock.stop()
        mine, theirs = [ours], []
        for round_ in range(rounds):
            # Alternate which build goes first, so neither always runs right after the other.
            if round_ == 0:
                theirs.append(run(self.args.reference_binary))
            elif round_ % 2:
                theirs.append(run(self.args.reference_binary)); mine.append(run(self.binary))
            else:
                mine.append(run(self.binary)); theirs.append(run(self.args.reference_binary))
            figure(f"reference round {round_ + 1}: relay CPU per send, this build / reference", mine[-1]["cpu_us"] / theirs[-1]["cpu_us"], "",
                   f"{mine[-1]['cpu_us']:.1f} / {theirs[-1]['cpu_us']:.1f} us")
        median_mine = statistics.median(r["cpu_us"] for r in mine)
        median_theirs = statistics.median(r["cpu_us"] for r in theirs)
        figure("single sends/s, reference build (audit on, 8 conn), median", statistics.median(r["sends_per_s"] for r in theirs), "sends/s",
               " ".join(f"{r['sends_per_s']:.0f}" for r in theirs))
        figure("relay CPU per send, this build, median of rounds", median_mine, "us", " ".join(f"{r['cpu_us']:.1f}" for r in mine))
        figure("relay CPU per send, reference build, median of rounds", median_theirs, "us", " ".join(f"{r['cpu_us']:.1f}" for r in theirs))
        figure("relay CPU per send / reference build", median_mine / median_theirs, "",
               f"target <= 0.33; medians of {rounds} alternating rounds; reference: the same run")
        figure("single sends/s / reference build", statistics.median(r["sends_per_s"] for r in mine) / statistics.median(r["sends_per_s"] for r in theirs), "")

    def production(self):
        """APNs' round trip (100 ms), 4 connections x 1000 streams, driven through the batch route."""
        log("production shape: mock answers after 100 ms, 4 connections x 1000 streams, batches of 1000")
        mock = Mock(self.binary, self.work, self.key, delay_ms=100, streams=1000)
        # One batch runs an eighth of ingress.max_batch_sends_running at once (ingress.batch_concurrency unset; a fixed
        # 64 per batch before): 500 here. 64 client connections, as before, so runs stay comparable.
        clients = 64
        # The default ingress.max_batch_sends_running (512) would hold it to 5,120 sends/s: raised to the 4,000 streams
        # (the client opens up to 1000 streams per connection, as many as the mock allows).
        relay = self.relay(mock, connections_per_origin=4, extra_ingress="  max_batch_sends_running: 4000")
        samples, stop = [], threading.Event()
        def sample():
            while not stop.is_set():
                try:
                    text = relay.metrics()
                    samples.append((relay.metric_sum("apns_relay_inflight_streams", text), relay.metric_sum("apns_relay_ingress_sends_admitted", text), relay.rss_mib()))
                except Exception: pass
                stop.wait(0.5)
        try:
            self.load(relay, 8000, connections=8, batch=1000)
            sampler = threading.Thread(target=sample); sampler.start()
            run = self.measured(relay, lambda: self.load(relay, 40_000 if self.q else 400_000, connections=clients, batch=1000))
            stop.set(); sampler.join()
        finally:
            relay.stop(); mock.stop()
        ceiling = 4 * 1000 / 0.1
        busy = samples[2:-2] or samples
        figure(f"production shape sends/s (batch 1000, {clients} client conn, 4 x 1000 streams, 100 ms)", run["sends_per_s"], "sends/s",
               f"{run['succeeded']:.0f} of {run['sends']:.0f} sends succeeded, {run['failed_requests']:.0f} failed requests")
        figure("production shape fraction of ceiling (40,000/s)", run["sends_per_s"] / ceiling, "", "reference: 4 x 1000 / 0.1 s")
        figure("production shape fraction of the stream bound the relay allows (4000 batch lanes / 0.1 s = 40,000/s)", run["sends_per_s"] / 40000, "",
               "ingress.max_batch_sends_running 4000; the client opens up to 1000 streams per connection")
        figure("production shape send latency p50", run["send_p50_ms"], "ms", "per send, as the relay timed it")
        figure("production shape send latency p99", run["send_p99_ms"], "ms")
        figure("production shape batch latency p50", run["p50_ms"], "ms", "per 1000-send batch request")
        figure("production shape in-flight HTTP/2 streams (median sample)", statistics.median(s[0] for s in busy), "streams",
               f"max {max(s[0] for s in busy):.0f}; admitted sends median {statistics.median(s[1] for s in busy):.0f}")
        figure("production shape relay RSS (max sample)", max(s[2] for s in busy), "MiB")
        figure("production shape relay CPU per send", run["cpu_us"], "us", f"{run['relay_cpu']:.2f} s CPU / {run['relay_sends']:.0f} sends")
        figure("production shape machine CPU per send", run["machine_us"], "us", self.machine_note(run))

    def sweep(self, title, points):
        """One relay, one measured run per point (audit on); each point prints
        sends/s, CPU per send and RSS. Returns the runs by label."""
        mock = Mock(self.binary, self.work, self.key)
        relay = self.relay(mock)
        runs = {}
        try:
            self.load(relay, 2000)
            for label, options in points:
                run = runs[label] = self.measured(relay, lambda: self.load(relay, **options))
                figure(f"{title} {label}: sends/s", run["sends_per_s"], "sends/s",
                       f"{run['succeeded']:.0f} of {run['sends']:.0f} succeeded, {run['failed_requests']:.0f} failed requests")
                figure(f"{title} {label}: relay CPU per send", run["cpu_us"], "us")
                figure(f"{title} {label}: machine CPU per send", run["machine_us"], "us", self.machine_note(run))
                figure(f"{title} {label}: relay RSS", run["rss"], "MiB")
        finally:
            relay.stop(); mock.stop()
        return runs

    def connections(self):
        log("growth: 1, 8, 64, 256 client connections, single sends, audit on")
        counts = [1, 8, 64] if self.q else [1, 8, 64, 256]
        self.sweep("connections", [(f"{c}", dict(sends=(2000 if self.q else 15000) if c > 1 else (1000 if self.q else 4000), connections=c)) for c in counts])

    def batches(self):
        log("growth: batch sizes 1, 10, 100, 1000 through /v1/send/batch, 8 connections, audit on")
        runs = self.sweep("batch size", [(f"{b}", dict(sends=(3000 if self.q else 30000) if b < 1000 else (6000 if self.q else 60000), connections=8, batch=b))
                                         for b in [1, 10, 100, 1000]])
        figure("target: batch route sends/s >= 30,000 (batches of 1000)", runs["1000"]["sends_per_s"] / 30000, "of target",
               f"batches of 100: {runs['100']['sends_per_s'] / 30000:.2f}")

    def payloads(self):
        log("growth: raw payloads of 200 B, 2 KB, 4 KB, single sends, 8 connections, audit on")
        self.sweep("payload", [(f"{p} B", dict(sends=2000 if self.q else 10000, connections=8, payload=p)) for p in [200, 2048, 4096]])

    def million(self):
        total = 100_000 if self.q else 1_000_000
        step = total // 10
        log(f"growth: {total:,} sends in one run (batches of 1000, 8 connections), RSS every {step:,}")
        mock = Mock(self.binary, self.work, self.key)
        relay = self.relay(mock)
        marks, stop = [], threading.Event()
        def sample(base):
            nxt = step
            while not stop.is_set() and nxt <= total:
                try: done = relay.succeeded_sends() - base
                except Exception: done = 0
                if done >= nxt:
                    marks.append((nxt, relay.rss_mib())); nxt += step
                stop.wait(0.2)  # each /metrics read costs the relay CPU, counted in its CPU per send
        try:
            self.load(relay, 2000)
            rss_start = relay.rss_mib()
            sampler = threading.Thread(target=sample, args=(relay.succeeded_sends(),)); sampler.start()
            run = self.measured(relay, lambda: self.load(relay, total, connections=8, batch=1000))
            time.sleep(0.5); stop.set(); sampler.join()
        finally:
            relay.stop(); mock.stop()
        figure(f"{total:,} sends: sends/s", run["sends_per_s"], "sends/s", f"{run['failed_requests']:.0f} failed requests")
        figure(f"{total:,} sends: relay CPU per send", run["cpu_us"], "us")
        figure(f"{total:,} sends: relay RSS before", rss_start, "MiB")
        figure(f"{total:,} sends: relay RSS every {step:,} sends", " ".join(f"{r:.0f}" for _, r in marks), "MiB")
        if marks:
            figure(f"{total:,} sends: RSS growth first to last sample", marks[-1][1] - marks[0][1], "MiB")

    def audit(self):
        rounds = 2 if self.q else 5
        sends = 3000 if self.q else 20000
        log(f"audit on vs off: {rounds} rounds, each the same single-send run with the audit to Postgres and with it out of the path")
        # Postgres shares the cores: `measured` reads its processes' CPU over each run, per row.
        runs = [("on", self.binary, self.args.database_url), ("off", self.binary, None)]
        reference = self.args.audit_reference_binary
        if reference:
            # The reference build against a database of its own, which it migrates: its schema.
            name = "send_bench_audit_reference"
            psql(self.args.database_url, f"DROP DATABASE IF EXISTS {name}")
            psql(self.args.database_url, f"CREATE DATABASE {name}")
            runs.append(("reference on", reference, with_database(self.args.database_url, name)))
            log(f"  and the reference build {reference} with the audit on, against its own schema")
        mock = Mock(self.binary, self.work, self.key)
        ratios, reference_ratios = [], []
        try:
            for round_ in range(rounds):
                results = {}
                for label, binary, url in (runs if round_ % 2 == 0 else list(reversed(runs))):
                    relay = Relay(binary, tempfile.mkdtemp(prefix="relay-", dir=self.work), self.key, mock, url, audit=url is not None)
                    try:
                        self.load(relay, 2000)
                        results[label] = self.measured(relay, lambda: self.load(relay, sends))
                    finally:
                        relay.stop()
                on, off = results["on"], results["off"]
                ratios.append(on["sends_per_s"] / off["sends_per_s"])
                figure(f"audit round {round_ + 1}: on / off sends/s", ratios[-1], "",
                       f"{on['sends_per_s']:.0f} / {off['sends_per_s']:.0f} sends/s; CPU/send {on['cpu_us']:.0f} / {off['cpu_us']:.0f} us; "
                       f"Postgres CPU/row {on['postgres_us']:.1f} us; machine CPU/send {on['machine_us']:.0f} / {off['machine_us']:.0f} us")
                if reference:
                    theirs = results["reference on"]
                    reference_ratios.append(theirs["sends_per_s"] / off["sends_per_s"])
                    figure(f"audit round {round_ + 1}: reference on / off sends/s", reference_ratios[-1], "",
                           f"{theirs['sends_per_s']:.0f} sends/s; CPU/send {theirs['cpu_us']:.0f} us; Postgres CPU/row {theirs['postgres_us']:.1f} us")
        finally:
            mock.stop()
        figure("audit on / off, all rounds", " ".join(f"{r:.2f}" for r in ratios), "", "target >= 0.9 in each")
        figure("audit on / off, median", statistics.median(ratios), "")
        if reference:
            figure("audit reference on / off, all rounds", " ".join(f"{r:.2f}" for r in reference_ratios), "", reference)
            figure("audit reference on / off, median", statistics.median(reference_ratios), "")

    def writer(self):
        """The audit writer against psql \\copy of the same rows (`apns-relay bench audit`)."""
        rows = 50_000 if self.q else 200_000
        log(f"audit writer vs psql \\copy: {rows:,} rows")
        out = subprocess.run([self.binary, "bench", "audit", "--rows", str(rows), "--database-url", self.args.database_url],
                             check=True, capture_output=True, text=True).stdout
        writer = float(re.search(r"audit writer: (\d+) rows/s", out).group(1))
        copy = float(re.search(r"psql \\copy:\s+(\d+) rows/s", out).group(1))
        whole = float(re.search(r"one COPY of every row: (\d+) rows/s", out).group(1))
        journaled = float(re.search(r"through the journal: (\d+) rows/s", out).group(1))
        figure("audit writer rows/s", writer, "rows/s", "encoded rows handed to the writer thread")
        figure("psql \\copy rows/s (same rows, same transaction size)", copy, "rows/s")
        figure("audit writer / psql \\copy", writer / copy, "", "target >= 0.85")
        figure("psql \\copy rows/s, one COPY of every row", whole, "rows/s")
        figure("audit writer through the journal rows/s", journaled, "rows/s", "each row encoded from its send and journaled first")
        figure("audit writer through the journal / psql \\copy", journaled / copy, "")

    def peers(self):
        """Our HTTP/2 client, h2load and aioapns against one mock-apns process, same connections."""
        requests = 10000 if self.q else 50000
        log(f"peers: our HTTP/2 client, h2load and aioapns, {requests} requests each against the same mock, 2 connections x 100 streams")
        mock = Mock(self.binary, self.work, self.key)
        try:
            out = subprocess.run([self.binary, "bench", "transport", "--requests", str(requests), "--connections", "2", "--streams", "100",
                                  "--mock-port", str(mock.port), "--ca-file", mock.cert, "--key-file", self.key,
                                  "--key-id", "BENCHKEY01", "--team-id", "BENCHTEAM1", "--bundle-id", "com.example.a"],
                                 check=True, capture_output=True, text=True).stdout
            ours = float(re.search(r"apns-relay client:\s+(\d+) req/s", out).group(1))
            h2load = float(re.search(r"h2load:\s+(\d+) req/s", out).group(1))
            aioapns = None
            if self.args.venv and os.path.exists(os.path.join(self.args.venv, "bin", "python")):
                peer = subprocess.run([os.path.join(self.args.venv, "bin", "python"), os.path.join(os.path.dirname(__file__), "aioapns_bench.py"),
                                       "--port", str(mock.port), "--ca-file", mock.cert, "--key", self.key, "--requests", str(requests // 5),
                                       "--connections", "2", "--concurrency", "200"], check=True, capture_output=True, text=True).stdout
                aioapns = float(re.search(r"aioapns: ([\d.]+) req/s", peer).group(1))
        finally:
            mock.stop()
        figure("HTTP/2 client req/s (same mock process, 2 conn x 100 streams)", ours, "req/s")
        figure("h2load req/s (same mock)", h2load, "req/s")
        figure("HTTP/2 client / h2load", ours / h2load, "", "target >= 0.8")
        if aioapns:
            figure("aioapns req/s (same mock, 2 conn, 200 concurrent)", aioapns, "req/s")
            figure("HTTP/2 client / aioapns", ours / aioapns, "", "target >= 5")
        else:
            figure("aioapns req/s", "not run (no --venv with aioapns)")

    # --- the HTTP/2 APNs ingress against the HTTP/1.1 path (issue 30, step 5) ------------------------------------------

    def h2ingress(self):
        """The HTTP/2 APNs ingress (`apns_ingress:`) beside the HTTP/1.1 path:
        one mock APNs, one Postgres, the shipped example configuration
        (section defaults) with the listener turned on, in two relays alike
        but for its TLS: one cleartext (HTTP/2 with prior knowledge, as on
        loopback or behind a mesh's sidecar), one TLS with ALPN h2. Each of
        `H2_ROUNDS` alternating rounds runs, each measured alone:

          http1         wrk, 16 connections, POST /v1/send (the snapshot alert the other sections send), cleartext relay
          h2c           h2load, 2 connections x 100 streams, POST /3/device/<token>, cleartext relay
          h2 tls        the same h2load over TLS, the TLS relay
          http1 device  wrk, 16 connections, POST /3/device/<token> over HTTP/1.1 with the API key, cleartext relay

        h2load sends as APNs client libraries send to APNs: few connections,
        many streams on each (aioapns, pushy and APNSwift keep one or a few
        connections open with up to the server's SETTINGS_MAX_CONCURRENT_STREAMS
        streams, 100 as shipped). Its requests carry the backend's own
        provider token (ES256, made with Python's cryptography; its public key
        is the bench API key's provider_key) and the apns-* headers and
        payload /v1/describe gives for the http1 body, so both ingresses
        hand APNs the same request; every request has a token of its own.

        Relay CPU per send (from /proc, over the sends the relay counted) and
        sends/s (the relay's count over the run's window) per round; issue
        30's target, per round and as the median of the rounds' ratios:
        h2c / http1 CPU per send <= 0.8, sends/s not lower. http1 device
        tells the route's share (no snapshot to validate and project) from
        the protocol's."""
        rounds = 1 if self.smoke else 2 if self.q else H2_ROUNDS
        seconds = 1 if self.smoke else 3 if self.q else 10
        warm_up = 500 if self.smoke else 5000
        connections = 16
        log(f"h2ingress: the HTTP/2 APNs ingress (h2load, 2 connections x 100 streams) beside /v1/send (wrk, {connections} connections), "
            f"the shipped configuration with apns_ingress on, {rounds} alternating rounds of about {seconds} s each")
        backend_key, public_key = os.path.join(self.work, "backend.p8"), os.path.join(self.work, "backend.pub.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", backend_key], check=True, capture_output=True)
        subprocess.run(["openssl", "pkey", "-in", backend_key, "-pubout", "-out", public_key], check=True, capture_output=True)
        certificate, private_key = self_signed_certificate(self.work)
        provider = {"key_id": H2_PROVIDER_KEY_ID, "team_id": H2_TEAM_ID, "public_key_file": public_key}
        mock = Mock(self.binary, self.work, self.key)
        relays = []
        try:
            for tls in (False, True):
                relays.append(H2IngressRelay(self.binary, tempfile.mkdtemp(prefix="relay-h2-", dir=self.work), self.key, mock, self.args.database_url,
                                             tls=tls, certificate=certificate, private_key=private_key, provider_key=provider))
            plain, secure = relays
            request = self.describe_send(plain)
            token = provider_token(backend_key, H2_PROVIDER_KEY_ID, H2_TEAM_ID, int(time.time()))
            for relay in relays: check_h2_send(relay, request, token, self.tokens(1))
            # Warm-up (connections, the token caches, the allocator); h2load's count: what it sent in `seconds` then.
            self.wrk(plain, seconds, connections)
            self.wrk_device(plain, request, seconds, connections)
            self.h2load(secure, request, token, warm_up)
            warm = self.h2load(plain, request, token, warm_up)
            requests = max(warm_up, round(warm["sends_per_s"] * seconds / 1000) * 1000)
            runs = [
                ("http1", plain, lambda: self.wrk(plain, seconds, connections)),
                ("h2c", plain, lambda: self.h2load(plain, request, token, requests)),
                ("h2 tls", secure, lambda: self.h2load(secure, request, token, requests)),
                ("http1 device", plain, lambda: self.wrk_device(plain, request, seconds, connections)),
            ]
            names = [name for name, _, _ in runs]
            results = {name: [] for name in names}
            for round_ in range(rounds):
                for name, relay, run in (runs if round_ % 2 == 0 else list(reversed(runs))):
                    result = self.measured(relay, run)
                    result["rate"] = result["relay_sends"] / result["window"]
                    if result["failed_requests"] > 0.01 * max(result["requests"], 1):
                        sys.exit(f"h2ingress {name}: {result['failed_requests']:.0f} of {result['requests']:.0f} requests failed: no figure")
                    results[name].append(result)
                figure(f"h2ingress round {round_ + 1}: relay CPU per send", " ".join(f"{results[n][-1]['cpu_us']:.1f}" for n in names), "us",
                       " / ".join(names) + "; sends/s " + " / ".join(f"{results[n][-1]['rate']:,.0f}" for n in names)
                       + "; failed " + " / ".join(f"{results[n][-1]['failed_requests']:.0f}" for n in names))
        finally:
            for relay in relays: relay.stop()
            mock.stop()
        def median(name, key): return statistics.median(r[key] for r in results[name])
        def spread(values): return f"{min(values):.3g}-{max(values):.3g} over {len(values)} rounds"
        def ratios(name, reference, key): return [a[key] / b[key] for a, b in zip(results[name], results[reference])]
        for name in names:
            figure(f"h2ingress relay CPU per send, {name}", median(name, "cpu_us"), "us",
                   f"median; rounds {' '.join(f'{r:.1f}' for r in (x['cpu_us'] for x in results[name]))}; {median(name, 'rate'):,.0f} sends/s; "
                   f"machine {median(name, 'machine_us'):.0f} us (mock {median(name, 'mock_us'):.0f}, postgres {median(name, 'postgres_us'):.0f}, "
                   f"load generator {median(name, 'load_us'):.0f})")
        for name in ("h2c", "h2 tls"):
            cpu, rate = ratios(name, "http1", "cpu_us"), ratios(name, "http1", "rate")
            figure(f"h2ingress {name} / http1, relay CPU per send", statistics.median(cpu), "",
                   f"target <= 0.8; median, {spread(cpu)}: {' '.join(f'{r:.2f}' for r in cpu)}; reference: wrk on /v1/send, same run")
            figure(f"h2ingress {name} / http1, sends/s", statistics.median(rate), "",
                   f"target >= 1; median, {spread(rate)}: {' '.join(f'{r:.2f}' for r in rate)}")
        protocol, route = ratios("h2c", "http1 device", "cpu_us"), ratios("http1 device", "http1", "cpu_us")
        figure("h2ingress h2c / http1 device, relay CPU per send", statistics.median(protocol), "",
               f"the same APNs request over both protocols; median, {spread(protocol)}")
        figure("h2ingress http1 device / http1, relay CPU per send", statistics.median(route), "",
               f"the route alone: no snapshot to validate and project; median, {spread(route)}")

    def describe_send(self, relay):
        """The APNs request the http1 runs' body becomes (POST /v1/describe,
        nothing sent): its apns-* headers but apns-id (one per send) and its
        payload, encoded compactly as the relay encodes it."""
        body = ('{"app":"%s","environment":"development","operation":"alert","token":"%s","snapshot":%s}' % (APP, "0" * 64, LIVE_SNAPSHOT)).encode()
        call = urllib.request.Request(f"http://127.0.0.1:{relay.port}/v1/describe", data=body, method="POST",
                                      headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
        with urllib.request.urlopen(call, timeout=30) as r:
            described = json.loads(r.read())
        payload = json.dumps(described["payload"], separators=(",", ":"), ensure_ascii=False).encode()
        if len(payload) != described["payloadBytes"]:
            sys.exit(f"h2ingress: the described payload re-encodes to {len(payload)} bytes, not the relay's {described['payloadBytes']}")
        headers = [(name, value) for name, value in described["headers"].items() if name.startswith("apns-") and name != "apns-id"]
        payload_file = os.path.join(self.work, "payload.json")
        with open(payload_file, "wb") as f: f.write(payload)
        log(f"  the APNs request of both: {' '.join(f'{n}: {v};' for n, v in headers)} a {len(payload)}-byte payload")
        return {"headers": headers, "payload": payload, "payload_file": payload_file}

    def h2load(self, relay, request, token, requests):
        """h2load against the relay's HTTP/2 APNs ingress: 2 connections x 100
        streams, `requests` POST /3/device/<token>, each to a token of its own
        (h2load's URI list, up to 20,000, used in turn)."""
        first = self.tokens(requests)
        scheme = "https" if relay.tls else "http"
        uris = os.path.join(self.work, "h2load-uris.txt")
        with open(uris, "w") as f:
            f.writelines(f"{scheme}://127.0.0.1:{relay.h2_port}/3/device/{first + i:064x}\n" for i in range(min(requests, 20000)))
        command = ["h2load", "-c", "2", "-m", "100", "-t", "1", "-n", str(requests), "-i", uris, "-d", request["payload_file"],
                   "-H", f"authorization: bearer {token}"]
        for name, value in request["headers"]: command += ["-H", f"{name}: {value}"]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        counts = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded", out)
        codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
        finished = re.search(r"finished in ([\d.]+)(ms|s), ([\d.]+) req/s", out)
        if not (counts and codes and finished): sys.exit(f"h2load printed what this script cannot read:\n{out}")
        total, ok = int(counts.group(1)), int(codes.group(1))
        return {"requests": total, "failed_requests": total - ok, "sends_per_s": float(finished.group(3))}

    def wrk_device(self, relay, request, seconds, connections):
        """wrk posting the described APNs request to the HTTP/1.1 POST
        /3/device/<token> with the API key, a new token for each."""
        script = os.path.join(self.work, "device.lua")
        headers = [("Authorization", f"Bearer {API_KEY}")] + request["headers"]
        table = ", ".join(f"[ {lua_string(n)} ] = {lua_string(v)}" for n, v in headers)  # spaced: "[[[" would open a long string
        with open(script, "w") as f:
            f.write(WRK_DEVICE_SCRIPT.replace("FIRST", str(self.tokens(2_000_000))).replace("HEADERS", table)
                    .replace("BODY", lua_string(request["payload"].decode())))
        out = subprocess.run(["wrk", "-t", str(min(2, connections)), "-c", str(connections), "-d", f"{seconds}s", "-s", script,
                              f"http://127.0.0.1:{relay.port}/"], check=True, capture_output=True, text=True).stdout
        requests = int(re.search(r"(\d+) requests in", out).group(1))
        non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
        duration = float(re.search(r"requests in ([\d.]+)s", out).group(1))
        return {"requests": requests, "failed_requests": non2xx, "sends_per_s": (requests - non2xx) / duration}


H2_ROUNDS = 5  # the h2ingress section: alternating rounds of each run
H2_PROVIDER_KEY_ID = "BKEND12345"  # the backend's own provider key (not the app's), as the ingress tests name it
H2_TEAM_ID = "BTEAM12345"


def warmed_quiet_relays(binary, database_url):
    """The relay with the audit on, then off, for the probes that compare the
    two (thread_cost.py, syscall_cost.py): the shipped example configuration
    with logs at error and tracing none, each relay warmed with 2,000 sends
    over 16 connections. Yields (label "on" or "off", relay, bench); each relay
    is stopped after its turn, the mock APNs and the bench's work directory
    at the end."""
    quiet = {"log_level": "error", "tracing": {"exporter": "none"}}
    yield from warmed_relays(binary, database_url, [("on", dict(shipped=quiet, audit=True)), ("off", dict(shipped=quiet, audit=False))])


def warmed_otlp_relays(binary, database_url):
    """The shipped example configuration as is ("defaults"), then with
    `tracing.exporter: otlp` to a live receiver that keeps its connections
    ("otlp"), as `defaults` measures them; yields as ``warmed_quiet_relays``."""
    yield from warmed_relays(binary, database_url, [("defaults", dict(shipped={}, audit=True)),
                                                    ("otlp", dict(shipped={"tracing": {"exporter": "otlp"}}, audit=True, otlp=True))])


def warmed_otlp_closing_relays(binary, database_url):
    """``warmed_otlp_relays`` with a receiver that closes each connection
    after its answer (HTTP/1.0, what every probe measured before stop 48):
    the relay opens a TCP connection for every batch."""
    otlp = {"tracing": {"exporter": "otlp"}}
    yield from warmed_relays(binary, database_url, [("defaults", dict(shipped={}, audit=True)),
                                                    ("otlp, collector closing", dict(shipped=otlp, audit=True, otlp=True, closing_collector=True))])


# The pairs thread_cost.py and syscall_cost.py compare (their --pair): the
# generator and the labels of its two relays, the measured one first.
WARMED_PAIRS = {
    "audit": (warmed_quiet_relays, ("on", "off")),
    "otlp": (warmed_otlp_relays, ("otlp", "defaults")),
    "otlp-closing": (warmed_otlp_closing_relays, ("otlp, collector closing", "defaults")),
}


def add_pair_argument(parser):
    parser.add_argument("--pair", choices=sorted(WARMED_PAIRS), default="audit",
                        help="audit: quiet with the audit on and off (default); otlp: the shipped defaults and with tracing.exporter otlp "
                             "(a collector keeping its connections); otlp-closing: the same with a collector closing each one")


def warmed_relays(binary, database_url, configurations):
    """Each (label, options) in turn: a relay warmed with 2,000 sends over 16
    connections, yielded as (label, relay, bench) and stopped after its turn
    (with its OTLP receiver when `otlp` is set)."""
    bench = Bench(argparse.Namespace(binary=binary, database_url=database_url, quick=False, smoke=False, venv=None))
    mock = Mock(bench.binary, bench.work, bench.key)
    try:
        for label, options in configurations:
            receiver = OTLPReceiver(keep_alive=not options.get("closing_collector")) if options.get("otlp") else None
            environment = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint} if receiver else None
            relay = Relay(bench.binary, tempfile.mkdtemp(prefix="relay-", dir=bench.work), bench.key, mock, database_url,
                          audit=options["audit"], shipped=options["shipped"], environment=environment)
            try:
                bench.load(relay, 2000, connections=16)
                yield label, relay, bench
            finally:
                relay.stop()
                if receiver: receiver.stop()
    finally:
        mock.stop()
        shutil.rmtree(bench.work, ignore_errors=True)


class H2IngressRelay(Relay):
    """`apns-relay serve` in the shipped example configuration with its HTTP/2
    APNs ingress on (bench_relay.add_apns_ingress), TLS or cleartext, audit
    to Postgres. `h2_port` is the listener's bound port: serve prints only
    the ingress and metrics ports, so it is the one other port the process
    listens on (listening_ports)."""

    def __init__(self, binary, work, key, mock, database_url, *, tls, certificate, private_key, provider_key):
        self.tls = tls
        super().__init__(binary, work, key, mock, database_url, shipped={},
                         configure=lambda path: add_apns_ingress(path, tls=tls, certificate_file=certificate, private_key_file=private_key,
                                                                 provider_key=provider_key))
        others = listening_ports(self.process.pid) - {self.port, self.metrics_port}
        if len(others) != 1:
            self.stop()
            sys.exit(f"h2ingress: cannot tell the HTTP/2 APNs ingress' port from the relay's other listening ports {sorted(others)}")
        self.h2_port = others.pop()


def listening_ports(pid):
    """The TCP ports (IPv4) process `pid` listens on: its socket inodes
    (/proc/PID/fd) matched against the LISTEN rows of /proc/PID/net/tcp."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try: target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError: continue  # closed meanwhile
        if target.startswith("socket:["): inodes.add(target[len("socket:["):-1])
    ports = set()
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes: ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def self_signed_certificate(directory):
    """A P-256 certificate for 127.0.0.1 and its key (the TLS listener's; h2load does not verify it)."""
    certificate, key = os.path.join(directory, "ingress-cert.pem"), os.path.join(directory, "ingress-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", certificate],
                   check=True, capture_output=True)
    return certificate, key


def provider_token(key_path, key_id, team_id, issued_at):
    """An ES256 provider token as APNs client libraries make one (header alg
    and kid, claims iss and iat, the raw r||s signature), with Python's
    cryptography: nothing of the relay's own signing code."""
    import base64
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    signed = f"{b64(json.dumps({'alg': 'ES256', 'kid': key_id}).encode())}.{b64(json.dumps({'iss': team_id, 'iat': issued_at}).encode())}"
    r, s = utils.decode_dss_signature(key.sign(signed.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signed}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def check_h2_send(relay, request, token, number):
    """One send through the relay's HTTP/2 APNs ingress with curl before any
    figure: anything but 200 (a refused provider token, a wrong topic) would
    make every h2load request a refusal, so the bench stops here with APNs'
    answer instead."""
    url = f"{'https' if relay.tls else 'http'}://127.0.0.1:{relay.h2_port}/3/device/{number:064x}"
    command = ["curl", "-sS", "--http2" if relay.tls else "--http2-prior-knowledge", "-k", "-o", "-", "-w", "\n%{http_code} %{http_version}",
               "-H", f"authorization: bearer {token}", "--data-binary", "@" + request["payload_file"], url]
    for name, value in request["headers"]: command += ["-H", f"{name}: {value}"]
    out = subprocess.run(command, capture_output=True, text=True)
    status = out.stdout.rsplit("\n", 1)[-1]
    if status != "200 2":
        sys.exit(f"h2ingress: one send through the {'TLS' if relay.tls else 'cleartext'} HTTP/2 ingress was answered {status!r}: "
                 f"{out.stdout.rsplit(chr(10), 1)[0]} {out.stderr}")


def lua_string(text):
    """`text` as a Lua long-bracket string literal (no escapes to get wrong)."""
    level = 0
    while f"]{'=' * level}]" in text: level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def parse_wrk_latency(out, label):
    m = re.search(rf"^\s+{re.escape(label)}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if not m: return 0.0
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]


LIVE_SNAPSHOT = ('{"schemaVersion":"5","kind":"liveActivity","id":"demo-order-1","surfaceId":"order-1","updatedAt":"2026-11-22T10:00:00Z",'
                 '"state":"active","liveActivity":{"title":"Order #1 is on its way","body":"Courier is 4 stops away","progress":0.4,'
                 '"deepLink":"demo://orders/1","modeLabel":"active","contextLabel":"delivery","statusLine":"active · 40%",'
                 '"actionLabel":"Track","stage":"inProgress","estimatedSeconds":900,"morePartsCount":0}}')

# wrk's Lua sending REQUEST (a wrk.format call whose device token is `marker`, 64 Ts)
# to a token of its own each time (threads take interleaved numbers, starting at
# FIRST). The request is formatted once per thread, with a placeholder where the token
# goes: every token has 64 hex digits, so the Content-Length holds; each request() then
# only formats the number's 16 hex digits and joins three strings, as the built-in
# generator rewrites only those digits: a wrk.format and a 700-byte body built per
# request cost wrk more CPU per send than the built-in generator's whole send.
WRK_TOKEN_SCRIPT = r"""
local counter = 0
local thread_index = 0
local threads = 0
local before, after
function setup(thread)
  thread:set("thread_index", threads)
  threads = threads + 1
end
function init(args)
  counter = FIRST + thread_index * 1000000
  local marker = string.rep("T", 64)
  local request = REQUEST
  local first, last = string.find(request, marker, 1, true)
  before = string.sub(request, 1, first - 1) .. string.rep("0", 48)
  after = string.sub(request, last + 1)
end
function request()
  counter = counter + 1
  return before .. string.format("%016x", counter) .. after
end
"""

# POST /v1/send of the built-in generator's alert (API_KEY, APP and SNAPSHOT filled in).
WRK_SCRIPT = WRK_TOKEN_SCRIPT.replace("REQUEST", """wrk.format("POST", nil, {["Authorization"] = "Bearer API_KEY", ["Content-Type"] = "application/json"}, '{"app":"APP","environment":"development","operation":"alert","token":"' .. marker .. '","snapshot":SNAPSHOT}')""")

# The HTTP/1.1 POST /3/device/<token>: the h2ingress section's APNs request
# (headers HEADERS, payload BODY).
WRK_DEVICE_SCRIPT = WRK_TOKEN_SCRIPT.replace("REQUEST", 'wrk.format("POST", "/3/device/" .. marker, {HEADERS}, BODY)')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/apns-relay")
    parser.add_argument("--database-url", required=True, help="Postgres for the audit (a throwaway cluster: scripts/bench starts one)")
    parser.add_argument("--venv", help="a virtualenv with aioapns (scripts/bench makes one under .build)")
    parser.add_argument("--quick", action="store_true", help="fewer sends per run: a smoke in about two minutes")
    parser.add_argument("--smoke", action="store_true",
                        help="the harness itself, for scripts/test: the defaults, agree and h2ingress sections with tiny runs; fails unless every figure line parses (no speed is judged)")
    parser.add_argument("--reference-binary", help="a release apns-relay of an earlier commit, measured in the agree section beside this one")
    parser.add_argument("--audit-reference-binary",
                        help="a release apns-relay of an earlier commit, also run with the audit on in the audit section, against a database of "
                             "its own that it migrates (its schema): its on / off beside this build's, same rounds, same audit-off runs")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args()
    sections = ["defaults", "agree", "h2ingress"] if args.smoke else [s for s in args.sections.split(",") if s]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown: sys.exit(f"unknown sections {unknown}; known: {SECTIONS}")
    bench = Bench(args)
    load1 = os.getloadavg()[0]
    figure("machine load average (1 min) at start", load1, "", f"{os.cpu_count()} cores, shared")
    try:
        for section in SECTIONS:
            if section in sections: getattr(bench, section)()
    finally:
        shutil.rmtree(bench.work, ignore_errors=True)
    figure("machine load average (1 min) at end", os.getloadavg()[0], "")
    if args.smoke:
        bad = [line for line in PRINTED if parse_figure(line) is None]
        names = [parse_figure(line)[0] for line in PRINTED if parse_figure(line)]
        expected = ["single sends/s, built-in load generator (audit on, 8 conn)", "relay CPU per send, built-in load generator",
                    "single sends/s, wrk (audit on, 8 conn)", "relay CPU per send, wrk", "agreement sends/s (built-in / wrk)",
                    "agreement CPU/send (built-in / wrk)", "relay CPU per send, defaults", "relay CPU per send, quiet",
                    "defaults / quiet, relay CPU per send", "otlp / defaults, relay CPU per send",
                    "otlp to a collector closing connections / defaults, relay CPU per send",
                    "audit share of relay CPU per send (audit, quiet - quiet)",
                    "audit share by thread: audit threads, pool, ingress thread, other", "Postgres CPU per send, audit rounds",
                    "audit's own share (audit, quiet - quiet with Postgres as busy)", "Postgres load, audit rounds / busy rounds", "h2ingress relay CPU per send, h2c",
                    "h2ingress relay CPU per send, h2 tls", "h2ingress h2c / http1, relay CPU per send", "h2ingress h2c / http1, sends/s"]
        missing = [name for name in expected if name not in names]
        if bad or missing:
            sys.exit(f"send_bench smoke FAILED: unparsable figure lines {bad}, missing figures {missing}")
        print(f"send_bench smoke: {len(PRINTED)} figures printed, all parse")


if __name__ == "__main__":
    main()
