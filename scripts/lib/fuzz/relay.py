"""The relay under attack: `apns-relay mock-apns` and `apns-relay serve` as
child processes on loopback, configured from a YAML file written here, with
the audit in a fresh database on the Postgres it is given. It can tell when
the relay died, and start it again on the same database and spool so the
campaign goes on and the rows from before the crash are still counted."""

import hashlib
import json
import pathlib
import secrets
import signal
import subprocess
import tempfile
import time
import uuid

from dataclasses import dataclass, field

from . import wire
from launcher import start_mock, start_serve

APP = "checkout-ios"  # the spec's example app, so schemathesis' examples really send
BUNDLE = "com.example.checkout"
OTHER_APP = "other-app"
OTHER_BUNDLE = "com.example.other"
LARGE_APP = "large-" + "a" * 58  # the longest app name the configuration allows (64 bytes)
LARGE_BUNDLE = "com.example.large"
TEAM = "FUZZTEAM12"
KEY_IDS = {APP: "FUZZKEY001", OTHER_APP: "FUZZKEY002"}


@dataclass
class Options:
    """How one relay of the campaign differs from the plain one. The plain
    campaign uses the defaults; the full-disk, flood, large-field and
    idempotency components each start a relay of their own."""

    mock_delay_ms: int = 0  # `mock-apns --delay-ms`: sends stay in flight
    request_log: bool = False  # `mock-apns --request-log`: what reached APNs, per request
    spool: str = None  # the spool directory (a small tmpfs), else one in the work directory
    serve_database_url: object = None  # url -> url serve uses (through a cuttable proxy), else the database's own
    send_deadline_seconds: float = 10
    drain_timeout_seconds: int = 20
    max_body_bytes: int = 65536  # None: the relay's default (1 MiB)
    large_app: bool = False  # a third app with a 64-byte name, for the backend key
    ingress: dict = field(default_factory=dict)  # more ingress settings (connection limits, timeouts)
    logging_level: str = "warning"
    apns_host: str = "127.0.0.1"  # the APNs origins' host: a name the relay looks up (the mock's certificate names localhost)
    mock_goaway_after: int = None  # `mock-apns --goaway-after`: the relay connects again every N streams


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

    def __init__(self, binary, database_url, directory=None, options=None, serve_binary=None, label="fuzz"):
        self.binary = binary
        self.serve_binary = serve_binary or binary  # a different `serve` (an older build) the campaign checks
        self.options = options or Options()
        self.directory = pathlib.Path(directory or tempfile.mkdtemp(prefix=f"apns-relay-{label}-"))
        self.database_url = fresh_database(database_url) if database_url else None
        self.instance = f"{label}-" + uuid.uuid4().hex[:8]
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
        mock_args = ["--delay-ms", str(self.options.mock_delay_ms)] if self.options.mock_delay_ms else []
        if self.options.request_log:
            mock_args += ["--request-log", str(self.request_log_path)]
        if self.options.mock_goaway_after:
            mock_args += ["--goaway-after", str(self.options.mock_goaway_after)]
        self.mock = start_mock(
            self.binary,
            ["--bundle-id", BUNDLE, "--bundle-id", OTHER_BUNDLE, "--bundle-id", LARGE_BUNDLE, "--unregistered-prefix", "dead",
             "--certificate-directory", str(self.directory / "mock")] + key_args + mock_args,
            self.directory / "mock.log")
        mock_port, certificate = self.mock.port, self.mock.certificate
        config = self.directory / "relay.yaml"
        config.write_text(self.configuration(mock_port, certificate))
        self._start_serve(config)

    def _start_serve(self, config):
        self.serve = start_serve(self.serve_binary, config, log_path=self.directory / "serve.log")
        self.port, self.metrics_port = self.serve.port, self.serve.metrics_port
        self.starts += 1

    @property
    def request_log_path(self):
        return self.directory / "mock-requests.jsonl"

    def mock_requests(self):
        """What the mock APNs received so far, one dict per request (apnsId,
        status, path, body), from its --request-log."""
        try:
            text = self.request_log_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    @property
    def pid(self):
        return self.serve.process.pid

    def resident_bytes(self):
        """serve's VmRSS from /proc, in bytes (None when it is gone)."""
        try:
            for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def kill(self, signal_number, timeout=60):
        """Sends `signal_number` to serve and waits for it to exit; its exit status."""
        self.serve.process.send_signal(signal_number)
        try:
            self.serve.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.serve.process.kill()
            self.serve.process.wait()
        self.serve.log.close()
        return self.serve.process.returncode

    def start_serve_again(self):
        """serve again on the same configuration, database and spool (after kill())."""
        self._start_serve(self.directory / "relay.yaml")

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
        options = self.options
        if options.large_app:
            apps += (f"  - name: {LARGE_APP}\n    bundle_id: {LARGE_BUNDLE}\n    team_id: {TEAM}\n    key_id: {KEY_IDS[APP]}\n"
                     f"    key_path: {self.directory / ('AuthKey_' + KEY_IDS[APP] + '.p8')}\n"
                     f"    environments: [development, production]\n")
        serve_url = options.serve_database_url(self.database_url) if (options.serve_database_url and self.database_url) else self.database_url
        database = f'  database_url: "{serve_url}"\n' if serve_url else ""
        ingress = {"listen": "127.0.0.1:0", "max_body_bytes": options.max_body_bytes, "connection_timeout_seconds": 3}
        ingress.update(options.ingress)
        ingress_text = "".join(f"  {name}: {value}\n" for name, value in ingress.items() if value is not None)
        backend_apps = f"[{APP}, {LARGE_APP}]" if options.large_app else f"[{APP}]"
        spool = options.spool or (self.directory / "spool")
        return (
            f"instance: {self.instance}\n"
            f"ingress:\n{ingress_text}"
            "metrics:\n  listen: 127.0.0.1:0\n"
            f"apns:\n  origins:\n    development: {options.apns_host}:{mock_port}\n    production: {options.apns_host}:{mock_port}\n"
            f"  ca_file: {certificate}\n  send_deadline_seconds: {options.send_deadline_seconds}\n"
            "retry:\n  base_delay_ms: 5\n  max_delay_ms: 50\n"
            f"apps:\n{apps}"
            "api_keys:\n" + key_entry("backend", backend_apps, False) + key_entry("other", f"[{OTHER_APP}]", False)
            + key_entry("admin", "['*']", True)
            + f"audit:\n{database}  spool_directory: {spool}\n  migrate_on_start: true\n  flush_interval_ms: 20\n"
            f"shutdown:\n  drain_timeout_seconds: {options.drain_timeout_seconds}\nlogging:\n  level: {options.logging_level}\n")

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

    def metric_sum(self, name, where=""):
        """The sum of every series of `name` (whose line contains `where`) on
        serve's /metrics (None when it does not answer)."""
        result = wire.request(self.metrics_port, "GET", "/metrics", timeout=10)
        if not result.first or result.first.status != 200:
            return None
        total = 0.0
        for line in result.first.body.decode("utf-8", "replace").splitlines():
            if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{") and where in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def rows_of_instance(self):
        """Every audit row this relay instance wrote, answered or not."""
        return int(psql(self.database_url, f"SELECT count(*) FROM apns_audit WHERE relay_instance = '{self.instance}'").strip() or 0)

    def healthz(self):
        result = wire.request(self.port, "GET", "/healthz", timeout=10)
        return result.first.status if result.first else None

    def stop(self):
        """Drains the relay (the audit is flushed) and stops the mock; the relay's exit status."""
        status = self.serve.stop() if self.serve else None
        if self.mock:
            self.mock.stop()
        return status
