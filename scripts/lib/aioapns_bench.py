#!/usr/bin/env python3
"""aioapns (PyPI) against a running `apns-relay mock-apns`: the peer client of issue 15.

Sends --requests alert pushes (token auth, the same payload as `bench transport`)
with --concurrency of them outstanding over --connections HTTP/2 connections,
and prints `aioapns: N req/s` with the failures. aioapns only knows Apple's
hosts, so its development protocol class is pointed at the mock (host, port)
and given the mock's certificate as its trusted CA (with ALPN h2).

    .build/bench-venv/bin/python scripts/lib/aioapns_bench.py --port 2197 --ca-file cert.pem --key AuthKey.p8
"""
import argparse, asyncio, importlib.metadata, time, uuid

import aioapns
from aioapns import NotificationRequest, PushType

from aioapns_local import local_client


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca-file", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--key-id", default="BENCHKEY01")
    parser.add_argument("--team-id", default="BENCHTEAM1")
    parser.add_argument("--topic", default="com.example.a")
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    args = parser.parse_args()

    client = local_client(args.port, args.ca_file, args.key, args.key_id, args.team_id, args.topic, max_connections=args.connections)
    token = "ab" * 32
    message = {"aps": {"alert": {"title": "bench", "body": "a push of typical size for the benchmark"}}}
    failures = 0

    async def send():
        nonlocal failures
        result = await client.send_notification(NotificationRequest(device_token=token, message=message, notification_id=str(uuid.uuid4()), push_type=PushType.ALERT))
        if not result.is_successful:
            failures += 1

    async def worker(count):
        for _ in range(count):
            await send()

    await asyncio.gather(*(send() for _ in range(args.connections * 2)))  # warm-up: open the connections
    failures = 0
    per_worker = args.requests // args.concurrency
    started = time.monotonic()
    await asyncio.gather(*(worker(per_worker) for _ in range(args.concurrency)))
    elapsed = time.monotonic() - started
    done = per_worker * args.concurrency
    print(f"aioapns: {done / elapsed:.0f} req/s ({done} requests in {elapsed:.2f} s, {failures} failed, "
          f"{args.connections} connections, {args.concurrency} concurrent, aioapns {importlib.metadata.version('aioapns')})")


if __name__ == "__main__":
    asyncio.run(main())
