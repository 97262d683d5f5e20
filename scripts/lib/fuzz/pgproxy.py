"""A TCP proxy between the relay and Postgres that the campaign can cut: the
relay's connections are reset and new ones refused, as when Postgres stops,
while the cluster itself (shared with the rest of the campaign) keeps
running; `restore()` listens again on the same port."""

import socket
import threading


class CuttableProxy:
    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.port = None
        self._listener = None
        self._lock = threading.Lock()
        self._sockets = set()
        self._up = False
        self.cuts = 0

    def url(self, database_url):
        """`database_url` with its host and port replaced by the proxy's."""
        scheme, rest = database_url.split("://", 1)
        authority, _, path = rest.partition("/")
        user = authority.rsplit("@", 1)[0] + "@" if "@" in authority else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}/{path}"

    def start(self):
        self._listen(0)
        return self

    def _listen(self, port):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
            self._up = True
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by cut()
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if not self._up:
                    client.close()
                    server.close()
                    continue
                self._sockets.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                self._close(sock)

    def _close(self, sock):
        with self._lock:
            self._sockets.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def cut(self):
        """Postgres is gone for the relay: every connection reset, new ones refused."""
        with self._lock:
            self._up = False
            listener, self._listener = self._listener, None
            sockets = list(self._sockets)
        if listener is not None:
            # shutdown first: a close alone leaves the socket listening while
            # the accept thread is blocked in it (Linux), so connects would
            # still succeed and only then be closed.
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for sock in sockets:
            # SO_LINGER 0: a reset, as a dead server's kernel would send.
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except OSError:
                pass
            self._close(sock)
        self.cuts += 1

    def restore(self):
        """Postgres is back, on the same address."""
        if not self._up:
            self._listen(self.port)

    def stop(self):
        self.cut()
