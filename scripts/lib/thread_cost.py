#!/usr/bin/env python3
"""Relay CPU and context switches per send, by thread, audit on against off
(or, with --pair otlp, the shipped defaults against them with OTLP export).

Starts the mock APNs and `apns-relay serve` (the shipped example
configuration with logs at error and tracing none, send_bench.py's `Relay`)
twice, once with the audit on and once off, drives each with the built-in
load generator (16 connections), and prints for every thread group (Swift's
cooperative pool, libmicrohttpd's thread, the journal and writer threads, the
HTTP/2 loop) its user and system time and its voluntary and involuntary
context switches per send, from /proc/PID/task/*/stat and status before and
after the measured sends. Clock ticks are 10 ms: over 20,000 sends a tick is
0.5 us a send.

    scripts/lib/thread_cost.py --binary .build/release/apns-relay --database-url URL [--sends 20000] [--pair audit|otlp]
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import send_bench as sb  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/apns-relay")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--sends", type=int, default=20000)
    sb.add_pair_argument(parser)
    args = parser.parse_args()
    ticks = os.sysconf("SC_CLK_TCK")
    warmed, _ = sb.WARMED_PAIRS[args.pair]
    for label, relay, bench in warmed(args.binary, args.database_url):
        before, sends_before = sb.thread_stats(relay.process.pid), relay.succeeded_sends()
        bench.load(relay, args.sends, connections=16)
        after, sends = sb.thread_stats(relay.process.pid), relay.succeeded_sends() - sends_before
        groups = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        for tid, (name, user, system, voluntary, involuntary, faults) in after.items():
            was = before.get(tid, (name, 0, 0, 0, 0, 0))
            group = groups[name]
            for i, value in enumerate((user - was[1], system - was[2], voluntary - was[3], involuntary - was[4], faults - was[5])): group[i] += value
        per = 1e6 / ticks / max(sends, 1)
        total = [sum(g[i] for g in groups.values()) for i in range(5)]
        print(f"{args.pair} {label}: {sends:.0f} sends; user {total[0] * per:.1f} us, system {total[1] * per:.1f} us a send; "
              f"context switches {total[2] / sends:.2f} voluntary, {total[3] / sends:.2f} involuntary a send; "
              f"minor faults {total[4] / sends:.3f} a send")
        for name, g in sorted(groups.items(), key=lambda item: -(item[1][0] + item[1][1])):
            if any(g):
                print(f"  {name:16s} user {g[0] * per:6.1f} us  system {g[1] * per:6.1f} us  switches {g[2] / sends:5.2f} / {g[3] / sends:5.2f}  faults {g[4] / sends:6.3f}")

if __name__ == "__main__":
    main()
