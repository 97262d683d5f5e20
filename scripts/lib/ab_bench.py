#!/usr/bin/env python3
"""Relay CPU per send of two or more relay builds, measured in the same run (issue 15).

Each round starts every binary's relay in turn (`apns-relay serve`, audit to
the same throwaway Postgres, or off) against one mock APNs process, warms it
up, and measures the same load through the built-in generator (`apns-relay
bench load`): the relay's user and system CPU per send from /proc/PID/stat,
over the sends it counted as succeeded. Alternating the builds round by round
spreads whatever else the machine does over all of them, so the ratio of the
medians is the figure to read; absolute microseconds drift with the machine.

    scripts/lib/ab_bench.py --database-url URL [--batch N] [--sends N] [--rounds R] [--no-audit] BIN_A BIN_B ...

With --load-generator the binaries are load generators instead: one relay
(--relay BIN, default the first binary) serves every run, and each round runs
every binary's `bench load` in turn against it; the figure is the generator's
own CPU per send (user + system of the finished child, RUSAGE_CHILDREN, over
the sends the relay counted), the CPU it takes from the cores the relay shares.

    scripts/lib/ab_bench.py --load-generator [--relay BIN] --database-url URL GEN_A GEN_B ...
"""
import argparse, shutil, statistics, sys

from send_bench import Bench, Mock, Relay, figure, log
from profile_send import measured_split


def load_shape(args):
    """The load every run is measured under, as the figures name it."""
    return f"{'batches of ' + str(args.batch) if args.batch else 'single sends'}, {args.connections} connections, audit {'off' if args.no_audit else 'on'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="", help="Postgres for the audit (scripts/ab starts a throwaway one)")
    parser.add_argument("--batch", type=int, default=0, help="items per POST /v1/send/batch (0: single POST /v1/send)")
    parser.add_argument("--sends", type=int, default=20000, help="sends in each measured run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each measures every binary once")
    parser.add_argument("--connections", type=int, default=8, help="client connections of the load generator")
    parser.add_argument("--no-audit", action="store_true", help="relays with `serve --benchmark-without-audit`")
    parser.add_argument("--load-generator", action="store_true",
                        help="compare the binaries' `bench load` (the generator's own CPU per send) against one relay")
    parser.add_argument("--relay", help="with --load-generator: the relay's binary (default: the first binary)")
    parser.add_argument("binaries", nargs="+", help="release apns-relay binaries; the first is the reference of the ratios")
    args = parser.parse_args()
    if not args.no_audit and not args.database_url: sys.exit("--database-url is needed unless --no-audit")
    if args.load_generator:
        return compare_generators(args)

    bench = Bench(argparse.Namespace(binary=args.binaries[0], database_url=args.database_url, quick=False, smoke=False, venv=None))
    mock = Mock(args.binaries[0], bench.work, bench.key)
    cpu = {binary: [] for binary in args.binaries}
    machine = {binary: [] for binary in args.binaries}
    shape = load_shape(args)
    try:
        for round in range(1, args.rounds + 1):
            for binary in args.binaries:
                relay = Relay(binary, bench.work, bench.key, mock, args.database_url, audit=not args.no_audit)
                try:
                    bench.load(relay, min(args.sends, 2000), connections=args.connections, batch=args.batch)
                    result = measured_split(bench, relay, lambda: bench.load(relay, args.sends, connections=args.connections, batch=args.batch))
                finally:
                    relay.stop()
                cpu[binary].append(result["cpu_us"])
                machine[binary].append(result["machine_us"])
                log(f"round {round}, {binary}: {result['cpu_us']:.1f} us (user {result['user_us']:.1f}, sys {result['sys_us']:.1f}), "
                    f"{result['sends_per_s']:.0f} sends/s, {result['switches']:.2f} context switches per send; "
                    f"machine {result['machine_us']:.1f} us (mock {result['mock_us']:.1f}, Postgres {result['postgres_us']:.1f}, "
                    f"load {result['load_us']:.1f})")
    finally:
        mock.stop()
        shutil.rmtree(bench.work, ignore_errors=True)
    reference = statistics.median(cpu[args.binaries[0]])
    for binary in args.binaries:
        median = statistics.median(cpu[binary])
        figure(f"relay CPU per send ({shape}), median of {args.rounds}: {binary}", median, "us",
               f"rounds {' '.join(f'{value:.1f}' for value in cpu[binary])}")
        figure(f"machine CPU per send (relay, mock, Postgres, load), median of {args.rounds}: {binary}", statistics.median(machine[binary]), "us",
               f"rounds {' '.join(f'{value:.1f}' for value in machine[binary])}")
        if binary != args.binaries[0]:
            figure(f"relay CPU per send / {args.binaries[0]}: {binary}", median / reference, "", "same run, rounds alternated")
            figure(f"machine CPU per send / {args.binaries[0]}: {binary}",
                   statistics.median(machine[binary]) / statistics.median(machine[args.binaries[0]]), "", "same run, rounds alternated")


def compare_generators(args):
    """Each binary's load generator, in turn every round, against one relay."""
    relay_binary = args.relay or args.binaries[0]
    bench = Bench(argparse.Namespace(binary=relay_binary, database_url=args.database_url, quick=False, smoke=False, venv=None))
    mock = Mock(relay_binary, bench.work, bench.key)
    relay = Relay(relay_binary, bench.work, bench.key, mock, args.database_url, audit=not args.no_audit)
    runs = {binary: [] for binary in args.binaries}
    shape = load_shape(args)
    try:
        for binary in args.binaries:
            bench.load(relay, min(args.sends, 2000), connections=args.connections, batch=args.batch, generator=binary)
        for round in range(1, args.rounds + 1):
            for binary in args.binaries:
                result = bench.measured(relay, lambda: bench.load(relay, args.sends, connections=args.connections, batch=args.batch, generator=binary))
                run = dict(us=result["load_us"], user=result["load_user_us"], system=result["load_sys_us"],
                           rate=result["sends_per_s"], relay=result["cpu_us"], failed=result["failed_requests"])
                runs[binary].append(run)
                log(f"round {round}, {binary}: load {run['us']:.1f} us/send (user {run['user']:.1f}, sys {run['system']:.1f}), "
                    f"{run['rate']:.0f} sends/s, relay {run['relay']:.1f} us/send, {run['failed']:.0f} failed requests")
    finally:
        relay.stop(); mock.stop()
        shutil.rmtree(bench.work, ignore_errors=True)
    reference = statistics.median(run["us"] for run in runs[args.binaries[0]])
    for binary in args.binaries:
        def median(key): return statistics.median(run[key] for run in runs[binary])
        rounds = " ".join(f"{run['us']:.1f}" for run in runs[binary])
        figure(f"load generator CPU per send ({shape}), median of {args.rounds}: {binary}", median("us"), "us",
               f"rounds {rounds}; user {median('user'):.1f}, sys {median('system'):.1f}; {median('rate'):,.0f} sends/s; relay {median('relay'):.1f} us/send")
        if binary != args.binaries[0]:
            figure(f"load generator CPU per send / {args.binaries[0]}: {binary}", median("us") / reference, "", "same relay, same run, rounds alternated")


if __name__ == "__main__":
    main()
