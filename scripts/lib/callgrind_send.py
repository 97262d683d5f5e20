#!/usr/bin/env python3
"""Instructions per send: `apns-relay serve` under valgrind's callgrind (issue 26).

perf is not available on every machine (this VM has no perf events), and a
CPU-time profile of two shared cores swings with the neighbours' load. An
instruction count does not: callgrind counts the instructions the relay's
threads execute, whatever else runs. The mock APNs, Postgres, the load
generator and the relay run as separate processes, as in send_bench.py
(whose Bench, Mock, Relay and OTLPReceiver this reuses); only the relay runs
under valgrind, with instrumentation off until its warm-up is done, then on for
exactly the measured sends (`callgrind_control -i on/off`), then dumped.

`--route h2c` drives the HTTP/2 APNs ingress instead of `/v1/send`: the
relay with `apns_ingress` on in cleartext (send_bench.py's H2IngressRelay),
h2load with 2 connections x 100 streams posting `/3/device/<token>` with a
provider token, the request `/v1/describe` gives for the /v1/send body, as
send_bench.py's h2ingress section sends it (issue 30, step 5).

Prints the instructions per send (total, and inclusive for named functions:
the log line, spans, the OTLP exporter, the audit journal and writer) and
keeps the dump for `callgrind_annotate`. Threads that wake on a timer (the
log drain's linger, the journal's sync interval, the exporter's schedule)
count per second, not per send, and valgrind slows the relay some fiftyfold:
compare two builds at the same --sends, and read the named functions.

Two workarounds for valgrind 3.19 (Debian 12) with Swift 6 binaries: the
relay is run from a copy without its debug info (`objcopy --strip-debug`:
valgrind's DWARF reader gives up on the toolchain's DWARF 5; the symbol table,
all callgrind needs, stays), and with a small preloaded `sigsuspend` that
copies its mask to the stack (libdispatch's signal thread passes one in
read-only memory, which valgrind writes to, and crashes).

    scripts/lib/callgrind_send.py --binary .build/release/apns-relay --database-url URL \
        [--configuration defaults|otlp|audit-quiet|quiet] [--route v1-send|h2c] [--sends 3000] [--output FILE] [--cache-sim]
"""
import argparse, os, re, shutil, stat, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from send_bench import (H2_PROVIDER_KEY_ID, H2_TEAM_ID, Bench, H2IngressRelay, Mock, OTLPReceiver, Relay, check_h2_send, figure, log,
                        provider_token, self_signed_certificate)

CONFIGURATIONS = {
    "defaults": dict(shipped={}, audit=True),
    "otlp": dict(shipped={"tracing": {"exporter": "otlp"}}, audit=True),
    "audit-quiet": dict(shipped={"log_level": "error", "tracing": {"exporter": "none"}}, audit=True),
    "quiet": dict(shipped={"log_level": "error", "tracing": {"exporter": "none"}}, audit=False),
}

SIGSUSPEND_SHIM = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, 8);
}
"""

# Inclusive counts of these (regular expressions over callgrind_annotate's function names).
NAMED = [
    ("log line (JSONLogHandler.log)", r"JSONLogHandler\.log\(event:"),
    ("  LogLineEncoder.encode", r"LogLineEncoder\.encode\("),
    ("send finished line (JSONLogHandler.log, sorted fields)", r"JSONLogHandler\.log\(level:"),
    ("  LogLineEncoder.line", r"LogLineEncoder\.line\("),
    ("  its fields (SendRun.sendLineFields)", r"SendRun\.sendLineFields\("),
    ("  LogDrain.append", r"LogDrain\.append\("),
    ("send finished line built (SendRun.publish)", r"SendRun\.publish\("),
    ("OTLPTracer.startSpan", r"OTLPTracer\.startSpan"),
    ("OTLPSpan.end", r"OTLPSpan\.end"),
    ("OTLPSpan attributes (modify)", r"OTLPSpan\.attributes\.modify"),
    ("OTLP exporter thread", r"OTLPExporter\.run\(\)"),
    ("  OTLPRequestEncoder.encode", r"OTLPRequestEncoder\.encode"),
    ("SendRun describe (span attributes)", r"SendRun\.describe"),
    ("audit: intent journaled (AuditJournal.appendIntent)", r"AuditJournal\.appendIntent\("),
    ("audit: completion journaled (AuditJournal.appendCompletion)", r"AuditJournal\.appendCompletion\("),
    ("audit: journal thread", r"AuditJournal\.run(Syncs|Groups)\(\)"),
    ("audit: writer thread", r"AuditWriterThread\.run\(\)"),
    ("log drain thread", r"LogDrain\.run\(\)"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/apns-relay")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--configuration", choices=sorted(CONFIGURATIONS), default="defaults")
    parser.add_argument("--route", choices=["v1-send", "h2c"], default="v1-send",
                        help="v1-send: wrk-like load on POST /v1/send (bench load); h2c: h2load on the cleartext HTTP/2 APNs ingress")
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--output", help="keep callgrind's dump here (default: deleted)")
    parser.add_argument("--cache-sim", action="store_true",
                        help="also simulate the caches (valgrind --cache-sim=yes; the host's L1 and LL sizes): prints the "
                             "instruction-cache and data-cache misses per send beside the instructions")
    args = parser.parse_args()
    if not shutil.which("valgrind"): sys.exit("valgrind is not installed (Debian: valgrind)")
    options = CONFIGURATIONS[args.configuration]
    if options["audit"] and not args.database_url: sys.exit("--database-url is needed for a configuration with the audit")

    binary = os.path.abspath(args.binary)
    work = tempfile.mkdtemp(prefix="apns-relay-callgrind-")
    dump = os.path.join(work, "callgrind.out")
    stripped = os.path.join(work, "apns-relay-nodebug")
    subprocess.run(["objcopy", "--strip-debug", binary, stripped], check=True)
    shim = os.path.join(work, "sigsuspend_shim.so")
    with open(shim + ".c", "w") as f: f.write(SIGSUSPEND_SHIM)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, shim + ".c"], check=True)
    # Only `serve` runs under valgrind: the mock and the load generator are the same binary.
    wrapper = os.path.join(work, "apns-relay")
    with open(wrapper, "w") as f:
        cache = "--cache-sim=yes " if args.cache_sim else ""
        f.write(f'#!/bin/sh\nif [ "$1" = serve ]; then LD_PRELOAD={shim} exec valgrind --tool=callgrind --instr-atstart=no {cache}'
                f'--callgrind-out-file={dump} -q "{stripped}" "$@"; fi\nexec "{binary}" "$@"\n')
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IEXEC)

    bench = Bench(argparse.Namespace(binary=wrapper, database_url=args.database_url, quick=False, smoke=False, venv=None))
    mock = Mock(binary, bench.work, bench.key)
    receiver = OTLPReceiver() if args.configuration == "otlp" else None
    environment = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint} if receiver else None
    if args.route == "h2c":
        if args.configuration != "defaults": sys.exit("--route h2c runs the shipped configuration (defaults) only, as send_bench.py's h2ingress")
        backend_key, public_key = os.path.join(bench.work, "backend.p8"), os.path.join(bench.work, "backend.pub.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", backend_key], check=True, capture_output=True)
        subprocess.run(["openssl", "pkey", "-in", backend_key, "-pubout", "-out", public_key], check=True, capture_output=True)
        certificate, private_key = self_signed_certificate(bench.work)
        relay = H2IngressRelay(wrapper, tempfile.mkdtemp(prefix="relay-h2-", dir=bench.work), bench.key, mock, args.database_url, tls=False,
                               certificate=certificate, private_key=private_key,
                               provider_key={"key_id": H2_PROVIDER_KEY_ID, "team_id": H2_TEAM_ID, "public_key_file": public_key})
        request = bench.describe_send(relay)
        token = provider_token(backend_key, H2_PROVIDER_KEY_ID, H2_TEAM_ID, int(time.time()))
        check_h2_send(relay, request, token, bench.tokens(1))
        def load(sends):
            result = bench.h2load(relay, request, token, sends)
            if result["failed_requests"]: sys.exit(f"h2load: {result['failed_requests']} of {result['requests']} requests failed: no figure")
    else:
        relay = Relay(wrapper, tempfile.mkdtemp(prefix="relay-", dir=bench.work), bench.key, mock, args.database_url,
                      audit=options["audit"], shipped=options["shipped"], environment=environment)
        def load(sends): bench.load(relay, sends, connections=args.connections)
    pid = str(relay.process.pid)
    def control(*command):
        out = subprocess.run(["callgrind_control", *command, pid], capture_output=True, text=True)
        log(f"callgrind_control {' '.join(command)}: {(out.stdout + out.stderr).strip()}")
    try:
        log(f"warm-up: {args.warmup} sends ({args.configuration}, {args.route}, under callgrind)")
        load(args.warmup)
        before = relay.succeeded_sends()
        control("-i", "on")
        log(f"measured: {args.sends} sends")
        load(args.sends)
        control("-i", "off")
        sends = relay.succeeded_sends() - before
        control("-d")
    finally:
        relay.stop(); mock.stop()
        if receiver: receiver.stop()
    dumps = sorted(p for p in os.listdir(work) if p.startswith("callgrind.out"))
    dumps = [os.path.join(work, p) for p in dumps if os.path.getsize(os.path.join(work, p)) > 0]
    # The explicit dump is the one with the measured sends (the last, at exit, holds nothing since collection went off).
    measured = max(dumps, key=os.path.getsize)
    # Instructions only (with --cache-sim the dump holds more events, each a column).
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--show=Ir", measured],
                         check=True, capture_output=True, text=True).stdout
    if args.cache_sim:
        misses = subprocess.run(["callgrind_annotate", "--show=I1mr,D1mr,D1mw,DLmw", measured], check=True, capture_output=True, text=True).stdout
        found = re.search(r"^\s*([\d,]+) \([\d. ]+%\)\s+([\d,]+) \([\d. ]+%\)\s+([\d,]+) \([\d. ]+%\)\s+([\d,]+) \([\d. ]+%\)\s+PROGRAM TOTALS",
                          misses, re.M)
        if found:
            for label, text in zip(("instruction-cache (L1) misses", "data-cache (L1) read misses", "data-cache (L1) write misses",
                                    "last-level cache write misses"), found.groups()):
                figure(f"{label} per send ({args.configuration}, {args.route})", int(text.replace(",", "")) / max(sends, 1), "misses",
                       "valgrind's cache simulation, not the hardware's counters")
    totals = re.search(r"^([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", out, re.M) or re.search(r"^([\d,]+)\s+PROGRAM TOTALS", out, re.M)
    total = int(totals.group(1).replace(",", ""))
    figure(f"relay instructions per send ({args.configuration}, {args.route})", total / max(sends, 1), "Ir", f"{sends:.0f} sends counted by the relay")
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \([\d. ]+%\)\s+\S*:(.*)$", line) or re.match(r"^\s*([\d,]+)\s+\S*:(.*)$", line)
        if m: rows.append((int(m.group(1).replace(",", "")), m.group(2)))
    demangled = subprocess.run(["swift", "demangle", "--compact", "--simplified"], input="\n".join(n for _, n in rows) + "\n",
                               capture_output=True, text=True).stdout.split("\n")
    rows = [(count, demangled[i] if i < len(demangled) else name) for i, (count, name) in enumerate(rows)]
    for label, pattern in NAMED:
        rx = re.compile(pattern)
        counts = [count for count, name in rows if rx.search(name)]
        figure(f"  {label}", (max(counts) if counts else 0) / max(sends, 1), "Ir per send")
    print("\n## top 40 inclusive, Ir per send")
    for count, name in rows[:40]:
        print(f"  {count / max(sends, 1):10.0f}  {name[:150]}")
    if args.output:
        shutil.copy(measured, args.output)
        log(f"callgrind dump kept in {args.output}: callgrind_annotate --inclusive=yes {args.output}")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
