#!/usr/bin/env python3
"""The mock APNs's CPU per request, of two or more builds, measured in the same run.

Each round starts every binary's mock (`apns-relay mock-apns`, as
send_bench.py's Mock starts it) in turn, warms it up, and sends it the same
requests with h2load: device sends as the relay writes them (ES256 JWT,
apns-push-type, apns-topic, apns-priority, apns-expiration, apns-id, a
typical payload), which the mock validates in full and answers 200. The
mock's user + system CPU (utime + stime from /proc/PID/stat) before and after
the measured run, over the requests h2load saw answered 2xx, is its CPU per
request. Two shapes: `single` (2 connections x 4 streams, what 8 client
connections of single sends put in flight to the relay's 2 connections) and
`batch` (2 connections x 200 streams, batches of 1000). The load generator is
the same h2load for every binary, so the ratio of the medians is the figure
to read; absolute microseconds drift with the machine.

    scripts/lib/mock_cost.py [--requests N] [--rounds R] [--shapes single,batch] BIN_A BIN_B ...
"""
import argparse, base64, json, re, shutil, statistics, subprocess, sys, time

from send_bench import Bench, Mock, figure, log, process_cpu_seconds

SHAPES = {"single": (2, 4), "batch": (2, 200)}
TOPIC = "com.example.bench"
TOKEN = "ab" * 32
PAYLOAD = '{"aps":{"alert":{"title":"bench","body":"a push of typical size for the benchmark"}}}'


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_to_raw(der):
    """ECDSA-Sig-Value (DER) to JOSE's R||S (32 bytes each)."""
    assert der[0] == 0x30
    index = 2 if der[1] < 0x80 else 3
    parts = []
    for _ in range(2):
        assert der[index] == 0x02
        length = der[index + 1]
        value = der[index + 2:index + 2 + length]
        parts.append(value.lstrip(b"\x00").rjust(32, b"\x00"))
        index += 2 + length
    return parts[0] + parts[1]


def provider_token(key_file, key_id="BENCHKEY01", team_id="BENCHTEAM1"):
    """An ES256 JWT signed with openssl, independent of the relay's signer."""
    header = b64url(json.dumps({"alg": "ES256", "kid": key_id}).encode())
    claims = b64url(json.dumps({"iss": team_id, "iat": int(time.time())}).encode())
    signing_input = f"{header}.{claims}".encode()
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=signing_input, capture_output=True, check=True).stdout
    return f"{header}.{claims}.{b64url(der_to_raw(der))}"


def h2load(mock, requests, connections, streams, jwt, body_file):
    """h2load against the mock; returns the requests answered 2xx (all must be)."""
    headers = {"authorization": f"bearer {jwt}", "apns-push-type": "alert", "apns-topic": TOPIC, "apns-priority": "10",
               "apns-expiration": "0", "apns-id": "5b7b5e1e-8c3a-4d7e-9f00-2a6c1d3e4f50"}
    command = ["h2load", "-n", str(requests), "-c", str(connections), "-m", str(streams), "-d", body_file]
    for name, value in headers.items(): command += ["-H", f"{name}: {value}"]
    out = subprocess.run(command + [f"https://127.0.0.1:{mock.port}/3/device/{TOKEN}"], capture_output=True, text=True).stdout
    m = re.search(r"status codes: (\d+) 2xx", out)
    succeeded = int(m.group(1)) if m else 0
    if succeeded != requests: sys.exit(f"h2load: {succeeded} of {requests} answered 2xx:\n{out}")
    return succeeded


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=50000, help="requests in each measured run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each measures every binary in every shape once")
    parser.add_argument("--shapes", default="single,batch", help="comma-separated: single (2 x 4 streams), batch (2 x 200 streams)")
    parser.add_argument("binaries", nargs="+", help="release apns-relay binaries; the first is the reference of the ratios")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown := [s for s in shapes if s not in SHAPES]: sys.exit(f"unknown shape(s): {', '.join(unknown)}")
    if not shutil.which("h2load"): sys.exit("h2load is needed (Debian package nghttp2-client)")

    bench = Bench(argparse.Namespace(binary=args.binaries[0], database_url="", quick=False, smoke=False, venv=None))
    body_file = f"{bench.work}/payload.json"
    with open(body_file, "w") as f: f.write(PAYLOAD)
    jwt = provider_token(bench.key)
    cpu = {(shape, binary): [] for shape in shapes for binary in args.binaries}
    try:
        for round in range(1, args.rounds + 1):
            for shape in shapes:
                connections, streams = SHAPES[shape]
                for binary in args.binaries:
                    mock = Mock(binary, bench.work, bench.key)
                    try:
                        h2load(mock, min(args.requests, 5000), connections, streams, jwt, body_file)  # warm-up
                        before = process_cpu_seconds(mock.process.pid)
                        started = time.monotonic()
                        answered = h2load(mock, args.requests, connections, streams, jwt, body_file)
                        elapsed = time.monotonic() - started
                        us = (process_cpu_seconds(mock.process.pid) - before) * 1e6 / answered
                    finally:
                        mock.stop()
                    cpu[(shape, binary)].append(us)
                    log(f"round {round}, {shape}, {binary}: {us:.1f} us per request, {answered / elapsed:,.0f} requests/s")
    finally:
        shutil.rmtree(bench.work, ignore_errors=True)
    for shape in shapes:
        connections, streams = SHAPES[shape]
        medians = {binary: statistics.median(cpu[(shape, binary)]) for binary in args.binaries}
        reference = args.binaries[0]
        for binary, median in medians.items():
            rounds = " ".join(f"{value:.1f}" for value in cpu[(shape, binary)])
            figure(f"mock CPU per request ({shape}: {connections} connections x {streams} streams), median of {args.rounds}: {binary}",
                   median, "us", f"rounds {rounds}")
        for binary in args.binaries[1:]:
            figure(f"mock CPU per request / {reference} ({shape}): {binary}", medians[binary] / medians[reference], "", "same run, alternated")

if __name__ == "__main__":
    main()
