#!/usr/bin/env python3
"""One APNs request with httpx (PyPI, `httpx[http2]`) over HTTP/2, as a
backend's own code would make it against APNs: the channel and broadcast
requests no APNs client library we test with makes (channel create, list,
delete, iOS 18 broadcast), sent to the relay's HTTP/2 APNs ingress.

Over TLS (ALPN h2) with --ca-file, else cleartext HTTP/2 with prior
knowledge. Prints one JSON line: what httpx sent (method, path, every header
as it went on the wire, the body) and what came back (HTTP version, status,
headers, body), so the caller can compare both ends with what APNs received.

    python3 httpx_apns_client.py --port 8443 --ca-file cert.pem --method POST \
        --path /1/apps/com.example.a/channels --header 'authorization: bearer <JWT>' \
        --header 'apns-request-id: <uuid>' --body '{"message-storage-policy": 1, "push-type": "LiveActivity"}'
"""
import argparse, json, ssl

import httpx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca-file", help="trust this CA and use TLS; without it: cleartext h2 with prior knowledge")
    parser.add_argument("--method", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--header", action="append", default=[], help="'name: value', repeatable")
    parser.add_argument("--body", help="the body, sent as these UTF-8 bytes")
    args = parser.parse_args()

    headers = []
    for header in args.header:
        name, _, value = header.partition(":")
        headers.append((name.strip(), value.strip()))
    if args.ca_file:
        base, verify = f"https://127.0.0.1:{args.port}", ssl.create_default_context(cafile=args.ca_file)
    else:
        base, verify = f"http://127.0.0.1:{args.port}", False
    # http1=False: h2 only; on http:// that is prior knowledge, on https:// ALPN offers h2 alone.
    with httpx.Client(http1=False, http2=True, verify=verify, timeout=60) as client:
        content = args.body.encode() if args.body is not None else None
        response = client.request(args.method, base + args.path, headers=headers, content=content)
        sent = response.request
        print(json.dumps({
            "sent": {
                "method": sent.method,
                "path": sent.url.raw_path.decode(),
                # The provider token is a credential: named, not printed.
                "headers": [[name.decode().lower(), "(sent)" if name.lower() == b"authorization" else value.decode()]
                            for name, value in sent.headers.raw],
                "body": sent.content.decode(),
            },
            "http_version": response.http_version,
            "status": response.status_code,
            "headers": [[name.decode().lower(), value.decode()] for name, value in response.headers.raw],
            "body": response.content.decode(),
        }))


if __name__ == "__main__":
    main()
