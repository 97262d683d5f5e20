#!/usr/bin/env python3
"""A stand-in relay ingress for testing `apns-relay bench load` (Tests/EndToEndTests/LoadGeneratorProcessTests.swift).

Python's own HTTP/1.1 server (keep-alive, Content-Length) answers
POST /v1/send and POST /v1/send/batch by the token numbers it is sent, so a
test knows in advance which sends fail and what the generator must count:

- /v1/send: token number n (the last 16 hex digits) divisible by 5: 503 with a
  JSON error body; divisible by 7: 200 with `Connection: close`, the connection
  closed after the answer; the first time a number divisible by 11 arrives, the
  connection closes without an answer (a kept-alive connection the server
  dropped: the generator reconnects and sends again); else 200.
- /v1/send/batch: a batch whose first token number is divisible by 3: 500;
  else 200 with one result per item (`latencyMs` 2.5) and
  `"summary":{"succeeded":k,...}`, k the items whose number is not divisible by 7.

Answers are compact JSON like the relay's, head and body in one write.

Every request is checked (authorization, content type, content length, JSON
body, 64-hex tokens never seen before); GET /stats answers what it saw:
{"requests", "answered", "dropped", "tokens", "duplicates", "problems"}.
Prints `load-peer on PORT` once listening.

    python3 scripts/lib/load_peer.py API_KEY
"""
import json, re, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY = sys.argv[1]
TOKEN = re.compile(r"^[0-9a-f]{64}$")
lock = threading.Lock()
stats = {"requests": 0, "answered": 0, "dropped": 0, "tokens": 0, "duplicates": 0, "problems": []}
seen, dropped = set(), set()


def problem(text):
    with lock:
        if len(stats["problems"]) < 20: stats["problems"].append(text)


def token_number(item):
    token = item.get("token", "")
    if not TOKEN.match(token):
        problem(f"bad token {token!r}")
        return 0
    number = int(token, 16)
    with lock:
        stats["tokens"] += 1
        if number in seen: stats["duplicates"] += 1
        seen.add(number)
    return number


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, document, close=False):
        body = json.dumps(document, separators=(",", ":")).encode()
        head = f"HTTP/1.1 {status} {self.responses[status][0]}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        if close:
            head += "Connection: close\r\n"
            self.close_connection = True
        self.wfile.write(head.encode() + b"\r\n" + body)
        self.wfile.flush()
        with lock: stats["answered"] += 1

    def do_GET(self):
        with lock: document = dict(stats)
        self.answer(200, document)

    def do_POST(self):
        with lock: stats["requests"] += 1
        if self.headers.get("Authorization") != f"Bearer {API_KEY}": problem(f"authorization {self.headers.get('Authorization')!r}")
        if self.headers.get("Content-Type") != "application/json": problem(f"content type {self.headers.get('Content-Type')!r}")
        length = int(self.headers.get("Content-Length", "-1"))
        raw = self.rfile.read(length) if length >= 0 else b""
        try:
            document = json.loads(raw)
        except ValueError:
            problem(f"body is not JSON: {raw[:80]!r}")
            return self.answer(400, {"error": {"code": "bad_json"}})
        if self.path == "/v1/send":
            number = int(document.get("token", "0" * 64)[-16:], 16)
            if number % 11 == 0:
                with lock:
                    first = number not in dropped
                    dropped.add(number)
                if first:
                    with lock: stats["dropped"] += 1
                    self.close_connection = True
                    return  # no answer: the generator must send this one again
            token_number(document)
            if number % 5 == 0: return self.answer(503, {"error": {"code": "unavailable", "message": "scripted failure"}})
            return self.answer(200, {"apnsId": "x", "status": "sent"}, close=number % 7 == 0)
        if self.path == "/v1/send/batch":
            numbers = [token_number(item) for item in document.get("items", [])]
            if numbers and numbers[0] % 3 == 0: return self.answer(500, {"error": {"code": "internal", "message": "scripted failure"}})
            succeeded = sum(1 for n in numbers if n % 7 != 0)
            results = [{"index": i, "status": "sent" if n % 7 else "failed", "latencyMs": 2.5} for i, n in enumerate(numbers)]
            return self.answer(200, {"results": results, "summary": {"succeeded": succeeded, "failed": len(numbers) - succeeded}})
        problem(f"path {self.path}")
        self.answer(404, {"error": {"code": "not_found"}})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"load-peer on {server.server_address[1]}", flush=True)
server.serve_forever()
