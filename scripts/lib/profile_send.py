#!/usr/bin/env python3
"""Where the relay's CPU goes, per send: a perf profile of `apns-relay serve` (issue 15).

The mock APNs (`apns-relay mock-apns`), Postgres, the load generator
(`apns-relay bench load`) and the relay (`apns-relay serve`) run as processes
of their own, as in scripts/lib/send_bench.py (whose Mock, Relay and Bench
this reuses). After a warm-up, two runs of the same load:

1. unprofiled: the relay's CPU per send, user and system time apart
   (utime and stime from /proc/PID/stat, over the sends the relay counted as
   succeeded in its /metrics);
2. recorded: `perf record -e cpu-clock -g -p PID` attached to the relay for
   exactly that run (a software clock: this VM has no hardware counters).

Then, from `perf script`, shares of the recorded samples: per shared object
(the leaf frame's), the top flat symbols (self time), and the inclusive share
of named frames (threads, libraries, modules, ingress steps: every sample with
such a frame anywhere on its stack). Every figure prints as one
`figure NAME: VALUE UNIT` line, like send_bench.py's.

    scripts/lib/profile_send.py --binary .build/release/apns-relay --database-url URL [--sends 20000] [--batch 0] [--no-audit] [--shipped [--otlp]]

--shipped profiles the relay in the shipped example configuration
(deploy/apns-relay.example.yaml with its placeholders filled in, as the bench's
defaults section runs it: logs at info into a file, tracing.exporter log)
instead of the benchmarks' quiet one (logs at error); with --otlp, its
tracing.exporter is otlp, to a live receiver (scripts/lib/otlp_receiver.py), as
the defaults section's otlp configuration.
"""
import argparse, collections, os, re, shutil, signal, subprocess, sys, tempfile, time

from send_bench import Bench, Mock, OTLPReceiver, figure, log

# Named frames: a label and a regular expression matched against each frame's
# demangled name (module-qualified: `Audit.AuditJournal.runSyncs() -> ()`) or
# its shared object's file name. A sample counts once per label however many
# of its frames match.
FRAMES = [
    ("audit journal thread", r"\bAudit\.AuditJournal\.run(Syncs|Groups)\(\)"),
    ("audit writer thread", r"\bAudit\.AuditWriterThread\.run\(\)"),
    ("fsync / fdatasync (kernel)", r"^__x64_sys_f(data)?sync$"),
    ("HTTP/2 loop thread(s)", r"\bHTTP2\.(ConnectionLoop|ConnectionCore)\.run\(\)"),
    ("libmicrohttpd", r"^libmicrohttpd\.so"),
    ("Swift cooperative pool jobs", r"^swift_job_run$"),
    ("ingress (module Ingress)", r"\bIngress\."),
    ("  step RequestMetrics", r"\bIngress\.RequestMetrics\b"),
    ("  step RequestSpan", r"\bIngress\.RequestSpan\b"),
    ("  step ErrorRendering", r"\bIngress\.ErrorRendering\b"),
    ("  step DrainGate", r"\bIngress\.DrainGate\b"),
    ("  step ConcurrencyCap", r"\bIngress\.ConcurrencyCap\b"),
    ("  step Authentication", r"\bIngress\.Authentication\b"),
    ("  step RateLimit", r"\bIngress\.RateLimit\b"),
    ("JSON (module RelayJSON)", r"\bRelayJSON\."),
    ("logging (Telemetry logging, swift-log)", r"\bTelemetry\.(JSONLogHandler|LogSink|LogLine|LogBuffer)|\bLogging\."),
    ("spans (Telemetry tracing, swift-distributed-tracing)", r"\bTelemetry\.(JSONSpan|SpanIdentity)|\bTracing\."),
    ("swift-otel (OTLP spans: processor, protobuf, HTTP client)", r"\bOTel\.|\bSwiftProtobuf\.|\bNIO(Core|Posix|HTTP1)?\.|\bAsyncHTTPClient\."),
    ("OTLP exporter (Telemetry.OTLP*: spans, buffer, encoder, HTTP client)", r"\bTelemetry\.OTLP"),
    ("  OTLP exporter thread", r"\bTelemetry\.OTLPExporter\.run\(\)"),
    ("metrics (Telemetry metrics, swift-metrics)", r"\bTelemetry\.(RelayMetrics|Metric)|\bCoreMetrics\."),
    ("audit record (AuditRecord, row layout, COPY line)", r"\bAudit\.(AuditRecord|AuditRowLayout|CopyLineWriter|DeadTokenRecord)\b"),
    ("JWT / OpenSSL (libcrypto, libssl)", r"^lib(crypto|ssl)\.so"),
    ("nghttp2", r"^libnghttp2\.so"),
    ("context switches (finish_task_switch)", r"^finish_task_switch"),
    ("futex (kernel)", r"^__x64_sys_futex$"),
]

FRAME_LINE = re.compile(r"^\s*([0-9a-f]+) (.*) \((.*)\)$")


def cpu_split(relay):
    """The relay's (user, system) CPU seconds so far, from /proc/PID/stat."""
    with open(f"/proc/{relay.process.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def context_switches(relay):
    """Context switches (voluntary + involuntary) of the relay's live threads so far."""
    total = 0
    for task in os.listdir(f"/proc/{relay.process.pid}/task"):
        try:
            with open(f"/proc/{relay.process.pid}/task/{task}/status") as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        total += int(line.split()[-1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


def measured_split(bench, relay, run):
    """bench.measured, plus the user and system microseconds per send and
    the context switches per send (threads that end within the window are
    not counted: the relay's long-lived threads are the ones on the path)."""
    user0, system0 = cpu_split(relay)
    switches0 = context_switches(relay)
    result = bench.measured(relay, run)
    user1, system1 = cpu_split(relay)
    switches1 = context_switches(relay)
    sends = max(result["relay_sends"], 1)
    result.update(user_us=(user1 - user0) / sends * 1e6, sys_us=(system1 - system0) / sends * 1e6,
                  switches=(switches1 - switches0) / sends)
    return result


def record(bench, relay, run, data, frequency):
    """Runs `run()` while perf records the relay; returns its measured figures."""
    if os.path.exists(data): os.remove(data)
    perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(frequency), "-g", "-p", str(relay.process.pid), "-o", data],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # perf writes the file's header once it has attached to every thread.
    deadline = time.monotonic() + 10
    while not (os.path.exists(data) and os.path.getsize(data) > 0):
        if perf.poll() is not None: sys.exit(f"perf record exited: {perf.stderr.read().strip()}")
        if time.monotonic() > deadline: sys.exit("perf record did not start within 10 s")
        time.sleep(0.05)
    try:
        return measured_split(bench, relay, run)
    finally:
        perf.send_signal(signal.SIGINT)
        _, errors = perf.communicate(timeout=120)
        if perf.returncode not in (0, -signal.SIGINT):
            sys.exit(f"perf record failed ({perf.returncode}): {errors.strip()}")


def samples(data):
    """Each sample's stack, leaf first, as (symbol, shared object) pairs."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym,dso"], check=True, capture_output=True, text=True).stdout
    stacks, current = [], []
    for line in out.splitlines():
        if not line.strip():
            if current: stacks.append(current)
            current = []
            continue
        if m := FRAME_LINE.match(line):
            current.append((m.group(2), os.path.basename(m.group(3))))
    if current: stacks.append(current)
    return stacks


def demangled(symbols, simplified=False):
    """Swift symbols demangled by the toolchain's `swift demangle` (others unchanged), in order."""
    if not symbols: return []
    options = ["--compact"] + (["--simplified"] if simplified else [])
    out = subprocess.run(["swift", "demangle"] + options, input="\n".join(symbols) + "\n", check=True, capture_output=True, text=True).stdout
    lines = out.split("\n")[:len(symbols)]
    return lines if len(lines) == len(symbols) else list(symbols)


def report(stacks, top):
    total = len(stacks)
    if not total: sys.exit("perf recorded no samples of the relay")
    unique = sorted({symbol for stack in stacks for symbol, _ in stack})
    full = dict(zip(unique, demangled(unique)))
    short = dict(zip(unique, demangled(unique, simplified=True)))
    figure("samples recorded", total, "", "cpu-clock; each is one tick of the relay on a CPU")

    print("\n## by shared object (leaf frame)")
    objects = collections.Counter(stack[0][1] for stack in stacks)
    for name, count in objects.most_common(15):
        print(f"  {count / total * 100:6.2f}%  {name}")

    print(f"\n## top {top} flat symbols (self)")
    flat = collections.Counter((short[stack[0][0]], stack[0][1]) for stack in stacks)
    for (name, obj), count in flat.most_common(top):
        print(f"  {count / total * 100:6.2f}%  {name[:140]}  [{obj}]")

    print("\n## inclusive share of named frames (samples with the frame anywhere on their stack)")
    patterns = [(label, re.compile(rx)) for label, rx in FRAMES]
    inclusive = collections.Counter()
    for stack in stacks:
        names = {full[symbol] for symbol, _ in stack} | {obj for _, obj in stack}
        for label, rx in patterns:
            if any(rx.search(name) for name in names): inclusive[label] += 1
    for label, _ in FRAMES:
        print(f"  {inclusive[label] / total * 100:6.2f}%  {label}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/apns-relay")
    parser.add_argument("--database-url", default="", help="Postgres for the audit (scripts/profile starts a throwaway one)")
    parser.add_argument("--sends", type=int, default=20000, help="sends in each of the two measured runs")
    parser.add_argument("--batch", type=int, default=0, help="items per POST /v1/send/batch (0: single POST /v1/send)")
    parser.add_argument("--connections", type=int, default=8, help="client connections of the load generator")
    parser.add_argument("--shipped", action="store_true", help="the shipped example configuration (logs at info, tracing.exporter log)")
    parser.add_argument("--otlp", action="store_true", help="with --shipped: tracing.exporter otlp to a live receiver")
    parser.add_argument("--no-audit", action="store_true", help="the relay with `serve --benchmark-without-audit` (no journal, no writer)")
    parser.add_argument("--frequency", type=int, default=2000, help="perf's samples per second of CPU time")
    parser.add_argument("--top", type=int, default=30, help="flat symbols to list")
    parser.add_argument("--output", help="keep perf's data here (for `perf report -i FILE`); by default it is deleted")
    args = parser.parse_args()
    if not shutil.which("perf"): sys.exit("perf is not installed (Debian: linux-perf; scripts/profile installs it)")
    if not args.no_audit and not args.database_url: sys.exit("--database-url is needed unless --no-audit")

    bench = Bench(argparse.Namespace(binary=args.binary, database_url=args.database_url, quick=False, smoke=False, venv=None))
    mock = Mock(args.binary, bench.work, bench.key)
    receiver = OTLPReceiver() if args.otlp else None
    shipped = ({"tracing": {"exporter": "otlp"}} if args.otlp else {}) if args.shipped else None
    relay = bench.relay(mock, audit=not args.no_audit, shipped=shipped,
                        environment={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint} if receiver else None)
    data = args.output or os.path.join(bench.work, "perf.data")
    shape = f"{'batches of ' + str(args.batch) if args.batch else 'single sends'}, {args.connections} connections, audit {'off' if args.no_audit else 'on'}{', shipped configuration' if args.shipped else ''}{', tracing otlp' if args.otlp else ''}"
    load = lambda: bench.load(relay, args.sends, connections=args.connections, batch=args.batch)
    try:
        log(f"warm-up: {min(args.sends, 2000)} sends ({shape})")
        bench.load(relay, min(args.sends, 2000), connections=args.connections, batch=args.batch)
        log(f"unprofiled run: {args.sends} sends")
        plain = measured_split(bench, relay, load)
        log(f"recorded run: {args.sends} sends under perf record -e cpu-clock -g -F {args.frequency}")
        recorded = record(bench, relay, load, data, args.frequency)
    finally:
        relay.stop(); mock.stop()
        if receiver: receiver.stop()
    try:
        figure(f"relay CPU per send ({shape})", plain["cpu_us"], "us",
               f"user {plain['user_us']:.1f} us, sys {plain['sys_us']:.1f} us; {plain['relay_sends']:.0f} sends, {plain['sends_per_s']:.0f} sends/s")
        figure("relay CPU per send while perf records", recorded["cpu_us"], "us",
               f"user {recorded['user_us']:.1f} us, sys {recorded['sys_us']:.1f} us; {recorded['relay_sends']:.0f} sends, {recorded['sends_per_s']:.0f} sends/s")
        report(samples(data), args.top)
        if args.output: log(f"perf data kept in {args.output}: perf report -i {args.output} --no-children --sort sym")
    finally:
        shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
