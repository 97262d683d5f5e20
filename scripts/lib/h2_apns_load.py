#!/usr/bin/env python3
"""APNs device sends over HTTP/2 with httpx (PyPI, `httpx[http2]`), many
streams on a few connections, as an APNs client library makes them: the
fault tests' load on the relay's HTTP/2 APNs ingress (cleartext, prior
knowledge; or TLS with --ca-file).

Each send has an `apns-id` of its own and goes to the token derived from it
(SHA-256 hex of the id, its first digits --token-prefix when given), with the same payload, so a repeat of an id is the
same notification: the relay's idempotency key. Prints one line per event,
flushed at once:

    SENT <apns-id>                 before the request goes out
    OK <apns-id> <idempotency-replayed or ->   (--no-apns-id: the apns-id answered)
    STATUS <code> <apns-id> <reason or -> <retry-after or ->
    ERR <apns-id> <exception name> <its message, quoted>  no answer (the connection died)

Modes: `--count N` sends N new ids then exits; `--until-input` sends new ids
until standard input closes (every stream finishes its current send);
`--repeat` reads ids from standard input, one a line, and sends each once
more, then exits.

    python3 h2_apns_load.py --port 8443 --bearer <JWT> --topic com.example.a --streams 16 --count 100
"""
import argparse, asyncio, hashlib, ssl, sys, uuid

import httpx

PAYLOAD = b'{"aps":{"alert":"fault test"}}'


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def token_of(apns_id, prefix=""):
    return prefix + hashlib.sha256(apns_id.encode()).hexdigest()[len(prefix):]


async def send(client, base, args, apns_id):
    headers = [("apns-topic", args.topic), ("apns-push-type", "alert")]
    if not args.no_apns_id:
        headers.append(("apns-id", apns_id))
    if args.bearer:
        headers.insert(0, ("authorization", "bearer " + args.bearer))
    say("SENT " + apns_id)
    try:
        response = await client.post(f"{base}/3/device/{token_of(apns_id, args.token_prefix)}", headers=headers, content=PAYLOAD)
    except Exception as error:  # the connection died: no answer
        say(f"ERR {apns_id} {type(error).__name__} {str(error)[:200]!r}")
        return
    if response.status_code == 200:
        # Without an apns-id of the client's: the one the relay answered (its audit row's).
        shown = response.headers.get("apns-id", apns_id) if args.no_apns_id else apns_id
        say(f"OK {shown} {response.headers.get('idempotency-replayed', '-')}")
    else:
        try:
            reason = response.json().get("reason") or "-"
        except Exception:
            reason = "-"
        say(f"STATUS {response.status_code} {apns_id} {reason} {response.headers.get('retry-after', '-')}")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca-file", help="TLS trusting this CA; without it cleartext h2 with prior knowledge")
    parser.add_argument("--bearer", help="the provider token (JWT); none: a client certificate, or nothing")
    parser.add_argument("--cert", help="client certificate file (TLS)")
    parser.add_argument("--key", help="its private key file")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--token-prefix", default="", help="hex digits every token starts with (a mock APNs rule's match)")
    parser.add_argument("--streams", type=int, default=8, help="sends in flight at once")
    parser.add_argument("--no-apns-id", action="store_true",
                        help="send no apns-id (no idempotency key): OK lines carry the apns-id the relay answered, others the id the token was made from")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--count", type=int)
    mode.add_argument("--until-input", action="store_true")
    mode.add_argument("--repeat", action="store_true")
    args = parser.parse_args()

    if args.ca_file:
        verify = ssl.create_default_context(cafile=args.ca_file)
        if args.cert:
            verify.load_cert_chain(args.cert, args.key)
        base = f"https://127.0.0.1:{args.port}"
    else:
        verify, base = False, f"http://127.0.0.1:{args.port}"
    limits = httpx.Limits(max_connections=max(1, args.streams // 8), max_keepalive_connections=max(1, args.streams // 8))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if args.until_input:
        loop.add_reader(sys.stdin, lambda: stop.set() if not sys.stdin.readline() else None)
    async with httpx.AsyncClient(http1=False, http2=True, verify=verify, timeout=120, limits=limits) as client:
        if args.repeat:
            ids = [line.strip() for line in sys.stdin if line.strip()]
            queue = iter(ids)
        else:
            queue = None
        sent = 0

        async def worker():
            nonlocal sent
            while True:
                if queue is not None:
                    apns_id = next(queue, None)
                    if apns_id is None:
                        return
                else:
                    if stop.is_set() or (args.count is not None and sent >= args.count):
                        return
                    sent += 1
                    apns_id = str(uuid.uuid4())
                await send(client, base, args, apns_id)

        await asyncio.gather(*(worker() for _ in range(args.streams)))


if __name__ == "__main__":
    asyncio.run(main())
