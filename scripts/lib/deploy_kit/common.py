"""What every deployment-kit check shares: where the files are, the relay's
defaults, the problem collector, and readers of values several files must
agree on (ports, the environment variables the relay reads, the job the
alerts watch)."""

import os
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
EXAMPLE_CONFIG = DEPLOY / "apns-relay.example.yaml"
RULES = ROOT / "alerts" / "apns-relay.rules.yml"
COMPOSE_DIR = DEPLOY / "container"
K8S = DEPLOY / "kubernetes"

# What the relay does when a setting is absent (deploy/apns-relay.example.yaml).
DEFAULT_DRAIN_SECONDS = 25
DEFAULT_INGRESS = "127.0.0.1:8080"
DEFAULT_METRICS = "127.0.0.1:9464"
SKIP = 3
# The OpenTelemetry SDK's standard variables the relay's trace export follows.
OTEL_ENVIRONMENT = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"}


class Problems(Exception):
    """Raised with every problem a check found."""

    def __init__(self, problems):
        super().__init__("; ".join(problems))
        self.problems = problems


class Skipped(Exception):
    pass


class Collector:
    def __init__(self):
        self.problems = []

    def expect(self, condition, message):
        if not condition:
            self.problems.append(message)
        return bool(condition)

    def done(self, summary):
        if self.problems:
            raise Problems(self.problems)
        return summary


def rel(path):
    return os.path.relpath(path, ROOT)


def load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def load_all(path):
    with open(path, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc is not None]


def port_of(listen):
    """The port of a host:port listen address ("0.0.0.0:9464", "[::]:9464")."""
    match = re.fullmatch(r"(?:\[[^\]]*\]|[^:\[\]]*):(\d{1,5})", str(listen))
    if not match:
        raise Problems([f"listen address {listen!r} is not host:port"])
    return int(match.group(1))


def relay_settings(config):
    """(ingress port, metrics port, drain seconds) of a relay configuration mapping."""
    ingress = ((config.get("ingress") or {}).get("listen")) or DEFAULT_INGRESS
    metrics = ((config.get("metrics") or {}).get("listen")) or DEFAULT_METRICS
    drain = ((config.get("shutdown") or {}).get("drain_timeout_seconds")) or DEFAULT_DRAIN_SECONDS
    return port_of(ingress), port_of(metrics), drain


def env_name_for_app(app):
    """APNS_RELAY_APP_<NAME>_...: upper-cased, every character but A-Z and 0-9 turned into "_"."""
    return re.sub(r"[^A-Z0-9]", "_", app.upper())


def known_environment():
    """Every variable deploy/apns-relay.example.yaml says the relay reads."""
    header = EXAMPLE_CONFIG.read_text(encoding="utf-8").split("\n\n", 1)[0]
    names = set(re.findall(r"^#\s+(APNS_RELAY_[A-Z_]+)\b", header, re.M))
    if "APNS_RELAY_CONFIG" not in names or "APNS_RELAY_DATABASE_URL" not in names:
        raise Problems([f"{rel(EXAMPLE_CONFIG)}: could not read the list of environment variables from its header"])
    return names


def check_env_name(name, apps, known, where, c):
    """A variable must be one the relay reads; a per-app one must name a configured app."""
    if name.startswith("PG"):  # libpq's own
        return
    if name in OTEL_ENVIRONMENT:  # OpenTelemetry's own, for the OTLP exporter
        return
    match = re.fullmatch(r"APNS_RELAY_APP_([A-Z0-9_]+)_(KEY_PATH|KEY_ID|TEAM_ID)", name)
    if match:
        c.expect(match.group(1) in {env_name_for_app(a) for a in apps},
                 f"{where}: {name} names no app of the configuration ({', '.join(sorted(apps))})")
        return
    c.expect(name in known, f"{where}: {name} is not a variable the relay reads (deploy/apns-relay.example.yaml)")


def alert_job():
    """The job label APNsRelayDown watches: up{job="..."}."""
    rules = load_yaml(RULES)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "APNsRelayDown":
                match = re.search(r'up\{job="([^"]+)"\}', rule["expr"])
                if match:
                    return match.group(1)
    raise Problems([f"{rel(RULES)}: no APNsRelayDown rule on up{{job=...}}"])
