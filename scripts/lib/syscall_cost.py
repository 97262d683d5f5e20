#!/usr/bin/env python3
"""Relay system calls per send, audit on against off (issue 26's audit share),
or with --pair otlp the shipped defaults against them with OTLP export.

Starts the mock APNs and `apns-relay serve` as thread_cost.py does (the
shipped example configuration with logs at error and tracing none), twice,
audit on and off; after 2,000 sends of warm-up attaches `strace -f` to the
relay for the measured sends and prints, per thread name and system call, its count per send
in each configuration and the difference. strace slows the relay several
times over, so only the counts mean anything here, not its times; use
thread_cost.py for CPU time and context switches.

    scripts/lib/syscall_cost.py --binary .build/release/apns-relay --database-url URL [--sends 5000] [--pair audit|otlp]
"""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import send_bench as sb  # noqa: E402


def parse_trace(path, names):
    """strace -f's lines ("TID name(args) = result", resumed calls counted
    once, at their start) -> {(thread name, system call): calls}."""
    calls = collections.Counter()
    call = re.compile(r"^(\d+)\s+([a-z_0-9]+)\(([^,]*), ?([A-Z_]*)")
    with open(path) as f:
        for line in f:
            match = call.match(line)
            if match:
                name = match.group(2)
                # A futex's operation tells a wake-up (WAKE) from a sleep (WAIT).
                if name == "futex": name += " " + match.group(4).replace("FUTEX_", "").replace("_PRIVATE", "")
                calls[(names.get(match.group(1), "other"), name)] += 1
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/apns-relay")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("--keep", help="copy the two traces into this directory")
    sb.add_pair_argument(parser)
    args = parser.parse_args()
    results = {}
    warmed, (first, second) = sb.WARMED_PAIRS[args.pair]
    for label, relay, bench in warmed(args.binary, args.database_url):
        summary = os.path.join(bench.work, f"strace-{label}.txt")
        names = {tid: found[0] for tid, found in sb.thread_stats(relay.process.pid).items()}  # thread id -> name
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-o", summary, "-p", str(relay.process.pid)], stderr=subprocess.DEVNULL)
        # strace writes its output file once it has attached: wait for it.
        while not os.path.exists(summary) and tracer.poll() is None: time.sleep(0.05)
        time.sleep(0.5)  # the pid's other threads attach right after the first
        sends_before = relay.succeeded_sends()
        bench.load(relay, args.sends, connections=16)
        sends = relay.succeeded_sends() - sends_before
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
        results[label] = (parse_trace(summary, names), sends)
        if args.keep: shutil.copy(summary, args.keep)
    (on, on_sends), (off, off_sends) = results[first], results[second]
    print(f"system calls a send, {first} ({on_sends} sends) / {second} ({off_sends} sends) / {first} - {second}")
    keys = sorted(set(on) | set(off), key=lambda k: -(on.get(k, 0) / on_sends - off.get(k, 0) / off_sends))
    for key in keys:
        a, b = on.get(key, 0) / on_sends, off.get(key, 0) / off_sends
        if max(a, b) >= 0.005:
            print(f"  {key[0]:16s} {key[1]:22s} {a:7.3f} {b:7.3f} {a - b:+7.3f}")
    ta, tb = sum(on.values()) / on_sends, sum(off.values()) / off_sends
    print(f"  {'all':39s} {ta:7.3f} {tb:7.3f} {ta - tb:+7.3f}")


if __name__ == "__main__":
    main()
