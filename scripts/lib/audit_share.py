#!/usr/bin/env python3
"""The audit's share of relay CPU per send, paired: one or two builds, audit on and off.

Starts the mock APNs once and, in each round, `apns-relay serve` (the shipped
example configuration with logs at error and tracing none, send_bench.py's
`Relay`) four times, or twice with one build: each build with the audit on,
then off, every configuration warmed with 2,000 sends and measured over
--sends single sends over 16 connections (the built-in load generator).
Relay CPU per send is utime + stime from /proc over the sends the relay
counted. The configurations alternate within every round, so a host whose
speed drifts between rounds moves all of them alike: the per-round
difference (on - off) is the audit's share, printed per round and as the
median with its range.

    scripts/lib/audit_share.py --database-url URL --after .build/release/apns-relay [--before OTHER] [--rounds 5] [--sends 20000]
"""
import argparse, os, shutil, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import send_bench as sb  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--after", required=True, help="the build measured (its release binary)")
    parser.add_argument("--before", help="a second build, measured in the same rounds")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sends", type=int, default=20000)
    args = parser.parse_args()
    builds = ([("before", args.before)] if args.before else []) + [("after", args.after)]
    bench = sb.Bench(argparse.Namespace(binary=args.after, database_url=args.database_url, quick=False, smoke=False, venv=None))
    quiet = {"log_level": "error", "tracing": {"exporter": "none"}}
    mock = sb.Mock(bench.binary, bench.work, bench.key)
    configurations = [(f"{name}, audit {'on' if audit else 'off'}", binary, audit) for name, binary in builds for audit in (True, False)]
    results = {label: [] for label, _, _ in configurations}
    try:
        for round_ in range(args.rounds):
            for label, binary, audit in configurations:
                relay = sb.Relay(binary, tempfile.mkdtemp(prefix="relay-", dir=bench.work), bench.key, mock, args.database_url,
                                 audit=audit, shipped=quiet)
                try:
                    bench.load(relay, 2000, connections=16)
                    cpu, sends = relay.cpu_seconds(), relay.succeeded_sends()
                    bench.load(relay, args.sends, connections=16)
                    results[label].append((relay.cpu_seconds() - cpu) / max(relay.succeeded_sends() - sends, 1) * 1e6)
                finally:
                    relay.stop()
            print(f"round {round_ + 1}: " + "  ".join(f"{label} {values[-1]:.1f} us" for label, values in results.items()), flush=True)
    finally:
        mock.stop()
        shutil.rmtree(bench.work, ignore_errors=True)
    for label, values in results.items():
        sb.figure(f"relay CPU per send, {label}", statistics.median(values), "us", f"median; {min(values):.1f}-{max(values):.1f}")
    for name, _ in builds:
        share = [on - off for on, off in zip(results[f"{name}, audit on"], results[f"{name}, audit off"])]
        sb.figure(f"audit share, {name}", statistics.median(share), "us",
                  f"median of the per-round differences; {min(share):.1f}-{max(share):.1f}; rounds {' '.join(f'{x:.1f}' for x in share)}")


if __name__ == "__main__":
    main()
