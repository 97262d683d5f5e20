"""The one launcher of `apns-relay mock-apns` and `apns-relay serve` as child
processes, shared by the benchmarks (send_bench.py and the scripts built on
it, overload_bench.py) and the fuzz campaign (fuzz/relay.py).

A child's standard output is read on a thread of its own, line by line, so
a child that prints more than a pipe holds never stalls on it; its standard
error goes to a log file (or nowhere). The ports it listens on are read from
the lines it prints when it is ready; it is stopped with SIGTERM, then
SIGKILL past a timeout."""

import os
import signal
import subprocess
import threading
import time


class ChildProcess:
    """A child whose standard output is read line by line on a thread."""

    def __init__(self, arguments, log_path=None, environment=None):
        self.log = open(log_path, "ab") if log_path else None
        self.process = subprocess.Popen(
            arguments, stdout=subprocess.PIPE, stderr=self.log or subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=dict(os.environ, **(environment or {})))
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.process.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def line_after(self, prefix, timeout=60):
        """What follows `prefix` on the first line that starts with it; raises
        when the child exits first or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"no '{prefix}' line from {' '.join(map(str, self.process.args[:3]))} (exit {self.process.poll()}); output: {self.lines[-10:]}")

    def alive(self):
        return self.process.poll() is None

    def stop(self, timeout=40):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log:
            self.log.close()
        return self.process.returncode


def port_of(url):
    """The port of `https://127.0.0.1:PORT` (any path after it)."""
    return int(url.rstrip("/").rsplit(":", 1)[1].split("/")[0])


def start_mock(binary, arguments, log_path=None):
    """`apns-relay mock-apns --port 0` with `arguments`, once it listens:
    the child, with `port` and `certificate` (the CA file to trust) set.
    stdbuf: mock-apns prints through stdio, which a pipe would buffer."""
    child = ChildProcess(["stdbuf", "-oL", str(binary), "mock-apns", "--port", "0"] + [str(a) for a in arguments], log_path)
    child.port = port_of(child.line_after("mock APNs listening on"))
    child.certificate = child.line_after("trust this certificate:")
    return child


def start_serve(binary, config, arguments=(), log_path=None, environment=None):
    """`apns-relay serve --config CONFIG` with `arguments`, once it listens:
    the child, with `port` (the ingress) and `metrics_port` set."""
    child = ChildProcess([str(binary), "serve", "--config", str(config)] + [str(a) for a in arguments], log_path, environment)
    child.port = port_of(child.line_after("apns-relay ingress on"))
    child.metrics_port = port_of(child.line_after("apns-relay metrics on"))
    return child
