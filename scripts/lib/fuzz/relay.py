"""The relay under attack: `apns-relay mock-apns` and `apns-relay serve` as
child processes on loopback, configured from a YAML file written here, with
the audit in a fresh database on the Postgres it is given. It can tell when
the relay died, and start it again on the same database and spool so the
campaign goes on and the rows from before the crash are still counted."""

import hashlib
import pathlib
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import uuid

from . import wire

APP = "checkout-ios"  # the spec's example app, so schemathesis' examples really send
BUNDLE = "com.example.checkout"
OTHER_APP = "other-app"
OTHER_BUNDLE = "com.example.other"
TEAM = "FUZZTEAM12"
KEY_IDS = {APP: "FUZZKEY001", OTHER_APP: "FUZZKEY002"}


class ChildProcess:
    """A child whose standard output is read line by line on a thread."""

    def __init__(self, arguments, log_path):
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.process.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def line_after(self, prefix, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"no '{prefix}' line from {self.process.args[1]} (exit {self.process.poll()}); output: {self.lines[-10:]}")

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
        self.log.close()
        return self.process.returncode


def port_of(url):
    return int(url.rstrip("/").rsplit(":", 1)[1].split("/")[0])


def psql(url, sql):
    result = subprocess.run(["psql", url, "-X", "-q", "-At", "-F", "\t", "-c", sql], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"psql: {result.stderr.strip()}")
    return result.stdout


def fresh_database(url):
    """A new database on the same cluster, so start-up migrations run from empty."""
    name = "fuzz_" + uuid.uuid4().hex[:10]
    psql(url, f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def write_key(path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    path.chmod(0o600)


class Relay:
    """Attributes the campaign reads: port, keys (name → plain key), database_url, instance."""

    def __init__(self, binary, database_url, directory=None):
        self.binary = binary
        self.directory = pathlib.Path(directory or tempfile.mkdtemp(prefix="apns-relay-fuzz-"))
        self.database_url = fresh_database(database_url) if database_url else None
        self.instance = "fuzz-" + uuid.uuid4().hex[:8]
        self.keys = {
            "backend": "fuzz-backend-" + secrets.token_hex(16),
            "other": "fuzz-other-" + secrets.token_hex(16),
            "admin": "fuzz-admin-" + secrets.token_hex(16),
        }
        self.mock = None
        self.serve = None
        self.port = None
        self.starts = 0

    def start(self):
        key_args = []
        for app, key_id in KEY_IDS.items():
            key_path = self.directory / f"AuthKey_{key_id}.p8"
            if not key_path.exists():
                write_key(key_path)
            key_args += ["--key", f"{key_id}:{TEAM}:{key_path}"]
        self.mock = ChildProcess(
            [self.binary, "mock-apns", "--port", "0", "--bundle-id", BUNDLE, "--bundle-id", OTHER_BUNDLE,
             "--unregistered-prefix", "dead", "--certificate-directory", str(self.directory / "mock")] + key_args,
            self.directory / "mock.log")
        mock_port = port_of(self.mock.line_after("mock APNs listening on"))
        certificate = self.mock.line_after("trust this certificate:")
        config = self.directory / "relay.yaml"
        config.write_text(self.configuration(mock_port, certificate))
        self._start_serve(config)

    def _start_serve(self, config):
        self.serve = ChildProcess([self.binary, "serve", "--config", str(config)], self.directory / "serve.log")
        self.port = port_of(self.serve.line_after("apns-relay ingress on"))
        self.starts += 1

    def restart_serve(self):
        """After a crash: the same configuration, database and spool (which it replays)."""
        if self.serve and self.serve.alive():
            self.serve.stop()
        self._start_serve(self.directory / "relay.yaml")

    def configuration(self, mock_port, certificate):
        def key_entry(name, apps, admin):
            digest = hashlib.sha256(self.keys[name].encode()).hexdigest()
            return (f"  - name: fuzz-{name}\n    sha256: {digest}\n    apps: {apps}\n    admin: {str(admin).lower()}\n"
                    f"    rate_per_second: 1000000\n    burst: 10000000\n")

        apps = ""
        for app, bundle in ((APP, BUNDLE), (OTHER_APP, OTHER_BUNDLE)):
            apps += (f"  - name: {app}\n    bundle_id: {bundle}\n    team_id: {TEAM}\n    key_id: {KEY_IDS[app]}\n"
                     f"    key_path: {self.directory / ('AuthKey_' + KEY_IDS[app] + '.p8')}\n"
                     f"    environments: [development, production]\n")
        database = f'  database_url: "{self.database_url}"\n' if self.database_url else ""
        return (
            f"instance: {self.instance}\n"
            "ingress:\n  listen: 127.0.0.1:0\n  max_body_bytes: 65536\n  connection_timeout_seconds: 3\n"
            "metrics:\n  listen: 127.0.0.1:0\n"
            f"apns:\n  origins:\n    development: 127.0.0.1:{mock_port}\n    production: 127.0.0.1:{mock_port}\n"
            f"  ca_file: {certificate}\n  send_deadline_seconds: 10\n"
            "retry:\n  base_delay_ms: 5\n  max_delay_ms: 50\n"
            f"apps:\n{apps}"
            "api_keys:\n" + key_entry("backend", f"[{APP}]", False) + key_entry("other", f"[{OTHER_APP}]", False)
            + key_entry("admin", "['*']", True)
            + f"audit:\n{database}  spool_directory: {self.directory / 'spool'}\n  migrate_on_start: true\n  flush_interval_ms: 20\n"
            "shutdown:\n  drain_timeout_seconds: 20\nlogging:\n  level: warning\n")

    def alive(self):
        return self.serve is not None and self.serve.alive()

    def died(self, grace=1.0):
        """True when the relay is dead (waiting `grace` seconds for a dying one)."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.05)
        return not self.alive()

    def exit_description(self):
        code = self.serve.process.returncode
        if code is None:
            return "running"
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exit {code}"

    def log_tail(self, lines=6):
        """The last lines of serve's log, or its last fatal error when it has one."""
        try:
            text = (self.directory / "serve.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        fatal = [line for line in text if "Fatal error" in line or "runtime failure" in line or "Crash" in line]
        return fatal[-1] if fatal else "\n".join(text[-lines:])

    def healthz(self):
        result = wire.request(self.port, "GET", "/healthz", timeout=10)
        return result.first.status if result.first else None

    def stop(self):
        """Drains the relay (the audit is flushed) and stops the mock; the relay's exit status."""
        status = self.serve.stop() if self.serve else None
        if self.mock:
            self.mock.stop()
        return status
