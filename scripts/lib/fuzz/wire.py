"""HTTP/1.1 on a raw socket: the fuzzer writes exactly the bytes it means
(bad framing, NUL in headers, duplicate fields) and reads what comes back,
including nothing at all (a clean close)."""

import socket
import time
from dataclasses import dataclass, field


@dataclass
class Response:
    status: int
    reason: str
    headers: list  # [(lowercased name, value)]
    body: bytes

    def header(self, name):
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def content_type(self):
        return (self.header("content-type") or "").split(";")[0].strip().lower()


@dataclass
class Exchange:
    """What one connection gave back: the responses in order, and how it ended."""

    responses: list = field(default_factory=list)
    closed: bool = False  # the server closed (or reset) the connection
    timed_out: bool = False
    error: str = ""  # a connection-level failure (refused, reset)

    @property
    def first(self):
        return self.responses[0] if self.responses else None


def request_bytes(method, target, headers, body=b"", version="HTTP/1.1"):
    """A well-formed request; headers is a list of (name, value) as str or bytes."""
    lines = [f"{method} {target} {version}".encode()]
    for name, value in headers:
        name = name.encode() if isinstance(name, str) else name
        value = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def standard_headers(host, body, extra=(), content_type="application/json"):
    headers = [("Host", host), ("Connection", "close")]
    if body is not None and content_type:
        headers.append(("Content-Type", content_type))
    headers.extend(extra)
    if body is not None:
        headers.append(("Content-Length", str(len(body))))
    return headers


class Connection:
    def __init__(self, port, timeout=40.0, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buffer = b""
        self.eof = False

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        if self.eof:
            return False
        chunk = self.sock.recv(65536)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def _line(self):
        while b"\n" not in self.buffer:
            if not self._fill():
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.rstrip(b"\r")

    def _exactly(self, count):
        while len(self.buffer) < count:
            if not self._fill():
                break
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def read_response(self, method="GET"):
        """One final response (interim 1xx ones are skipped), or None when the
        connection ended before a status line."""
        while True:
            response = self._read_one(method)
            if response is None or not 100 <= response.status < 200:
                return response

    def _read_one(self, method):
        line = self._line()
        while line == b"":
            line = self._line()
        if line is None:
            return None
        parts = line.decode("latin-1").split(" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            return Response(0, "unparseable status line: " + line[:80].decode("latin-1"), [], b"")
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        while True:
            header = self._line()
            if header is None or header == b"":
                break
            name, _, value = header.decode("latin-1").partition(":")
            headers.append((name.strip().lower(), value.strip()))
        response = Response(status, reason, headers, b"")
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return response
        encoding = (response.header("transfer-encoding") or "").lower()
        length = response.header("content-length")
        if "chunked" in encoding:
            body = b""
            while True:
                size_line = self._line()
                if size_line is None:
                    break
                try:
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    break
                if size == 0:
                    while (trailer := self._line()) not in (None, b""):
                        pass
                    break
                body += self._exactly(size)
                self._line()
            response.body = body
        elif length is not None and length.isdigit():
            response.body = self._exactly(int(length))
        else:
            while self._fill():
                pass
            response.body, self.buffer = self.buffer, b""
        return response


def exchange(port, data, *, expect=1, timeout=40.0, method="GET", pause_after=None, tail=b""):
    """Writes `data` (optionally `tail` after `pause_after` seconds), reads up to
    `expect` responses and notes how the connection ended."""
    result = Exchange()
    try:
        connection = Connection(port, timeout=timeout)
    except OSError as error:
        result.error = f"connect: {error}"
        return result
    try:
        try:
            connection.send(data)
            if pause_after is not None:
                time.sleep(pause_after)
                connection.send(tail)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        for _ in range(expect):
            response = connection.read_response(method)
            if response is None:
                result.closed = True
                break
            result.responses.append(response)
            if (response.header("connection") or "").lower() == "close":
                break
    except socket.timeout:
        result.timed_out = True
    except ConnectionResetError:
        result.closed = True
    except OSError as error:
        result.error = str(error)
    finally:
        connection.close()
    return result


def request(port, method, target, *, body=None, headers=(), content_type="application/json", timeout=40.0):
    """One request on its own connection; returns an Exchange."""
    payload = b"" if body is None else body
    data = request_bytes(method, target, standard_headers(f"127.0.0.1:{port}", body, headers, content_type), payload)
    return exchange(port, data, timeout=timeout, method=method)
