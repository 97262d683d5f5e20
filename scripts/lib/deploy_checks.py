"""Consistency checks of the deployment kit (deploy/), run by scripts/check-deploy.

    python3 scripts/lib/deploy_checks.py CHECK

prints one line saying what was checked, or the problems found, and exits 0
(passed), 1 (failed) or 3 (skipped: a tool or module this machine lacks).
Each check reads the files the way the tool that runs them would (Compose,
Kubernetes, systemd, Docker, Prometheus) and compares the values that must
agree across them: ports, names, paths, timeouts.
"""

import fnmatch
import os
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
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


# ---------------------------------------------------------------- helpers

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
    if name in OTEL_ENVIRONMENT:  # OpenTelemetry's own, for the OTLP exporter (issue #16)
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


# ---------------------------------------------------------------- yaml

def check_yaml():
    c = Collector()
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())
    documents = 0
    for path in files:
        try:
            docs = load_all(path)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{rel(path)}:{mark.line + 1}:{mark.column + 1}" if mark else rel(path)
            c.expect(False, f"{where}: {getattr(error, 'problem', None) or error}")
            continue
        c.expect(docs, f"{rel(path)}: no YAML document in it")
        documents += len(docs)
    c.expect(files, "no YAML files under deploy/")
    return c.done(f"{len(files)} files, {documents} documents parse")


# ---------------------------------------------------------------- systemd

def parse_unit(path):
    """[(section, key, value)] of a systemd unit file, continuation lines joined."""
    entries, section, pending = [], None, ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        entries.append((section, key.strip(), value.strip()))
    return entries


def systemd_seconds(value):
    total = 0
    for number, unit in re.findall(r"(\d+)\s*(min|ms|s|m|h)?", value):
        total += int(number) * {"": 1, "s": 1, "min": 60, "m": 60, "h": 3600, "ms": 0.001}[unit]
    return total


def check_systemd_unit():
    c = Collector()
    unit_path = DEPLOY / "systemd" / "apns-relay.service"
    env_path = DEPLOY / "systemd" / "apns-relay.env"
    entries = parse_unit(unit_path)
    service = [(k, v) for s, k, v in entries if s == "Service"]
    values = {}
    for key, value in service:
        values.setdefault(key, []).append(value)

    def one(key):
        return values.get(key, [None])[-1]

    required = {
        "DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
        "NoNewPrivileges": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
        "StateDirectory": "apns-relay", "Restart": "on-failure", "KillSignal": "SIGTERM",
    }
    for key, wanted in required.items():
        c.expect(one(key) == wanted, f"{rel(unit_path)}: {key}= should be {wanted!r} (is {one(key)!r})")
    c.expect(one("RestrictAddressFamilies"), f"{rel(unit_path)}: RestrictAddressFamilies= missing")
    c.expect("@system-service" in (values.get("SystemCallFilter") or []),
             f"{rel(unit_path)}: SystemCallFilter=@system-service missing")

    config = load_yaml(EXAMPLE_CONFIG)
    _, _, drain = relay_settings(config)
    stop = systemd_seconds(one("TimeoutStopSec") or "90")
    c.expect(stop > drain, f"{rel(unit_path)}: TimeoutStopSec={one('TimeoutStopSec')} must exceed the drain ({drain} s)")

    exec_start = one("ExecStart") or ""
    c.expect(re.search(r"apns-relay serve\b", exec_start), f"{rel(unit_path)}: ExecStart does not run `apns-relay serve`")
    c.expect(any("check-config" in v for v in values.get("ExecStartPre", [])),
             f"{rel(unit_path)}: no ExecStartPre running check-config")

    # Environment= and the env file: only variables the relay reads, and each
    # per-app key path handed over by a LoadCredential= of the same name.
    known = known_environment()
    apps = {a["name"] for a in config.get("apps", [])}
    environment = {}
    for value in values.get("Environment", []):
        for assignment in re.findall(r'"[^"]*"|\S+', value):
            name, _, setting = assignment.strip('"').partition("=")
            environment[name] = setting
            check_env_name(name, apps, known, f"{rel(unit_path)} Environment=", c)
    for number, line in enumerate(env_path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if c.expect(match, f"{rel(env_path)}:{number}: not NAME=value"):
            check_env_name(match.group(1), apps, known, f"{rel(env_path)}:{number}", c)
    credentials = {v.split(":", 1)[0]: v.split(":", 1)[1] if ":" in v else "" for v in values.get("LoadCredential", [])}
    key_paths = {k: v for k, v in environment.items() if k.endswith("_KEY_PATH")}
    c.expect(key_paths, f"{rel(unit_path)}: no APNS_RELAY_APP_<NAME>_KEY_PATH in Environment=")
    for name, setting in key_paths.items():
        match = re.fullmatch(r"%d/(.+)", setting)
        if c.expect(match, f"{rel(unit_path)}: {name}={setting} should be %d/<credential>"):
            c.expect(match.group(1) in credentials, f"{rel(unit_path)}: {name} reads credential {match.group(1)!r}, "
                     f"but LoadCredential= gives {sorted(credentials)}")
    spool = environment.get("APNS_RELAY_SPOOL_DIRECTORY", "")
    c.expect(spool.startswith("%S/apns-relay") or spool.startswith("/var/lib/apns-relay"),
             f"{rel(unit_path)}: the spool ({spool or 'default'}) is not in the StateDirectory")
    return c.done(f"hardening, TimeoutStopSec {stop:g} s > drain {drain} s, {len(environment)} Environment= and "
                  f"env-file names known, key paths match LoadCredential=")


# ---------------------------------------------------------------- Dockerfile

def dockerfile_instructions(path):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    instructions, pending = [], ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        line = pending + stripped
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        word, _, rest = line.partition(" ")
        instructions.append((word.upper(), rest.strip()))
    return instructions


def dockerignore_excludes(patterns, path):
    """Whether .dockerignore excludes `path` (Docker's rules: last match wins, ! re-includes)."""
    excluded = False
    parts = path.split("/")
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern[1:] if negate else pattern
        pattern = pattern.strip("/")
        # A pattern matching a directory matches everything below it.
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


def check_dockerfile():
    c = Collector()
    path = COMPOSE_DIR / "Dockerfile"
    instructions = dockerfile_instructions(path)
    args = {}
    for word, rest in instructions:
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value

    def expand(text):
        return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), text)

    stages, current = {}, None
    for word, rest in instructions:
        if word == "FROM":
            match = re.fullmatch(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            current = match.group(2) or str(len(stages))
            stages[current] = {"image": expand(match.group(1)), "steps": []}
        elif current is not None:
            stages[current]["steps"].append((word, rest))
    c.expect(list(stages) == ["build", "runtime"], f"{rel(path)}: stages should be build, runtime (are {list(stages)})")
    build, runtime = stages.get("build", {"image": "", "steps": []}), stages.get("runtime", {"image": "", "steps": []})
    c.expect(re.fullmatch(r"swift:\d+\.\d+-bookworm", build["image"]), f"{rel(path)}: build stage is {build['image']}, not swift:X.Y-bookworm")
    c.expect(runtime["image"] == "debian:bookworm-slim", f"{rel(path)}: runtime stage is {runtime['image']}")

    # The toolchain must satisfy the manifest's swift-tools-version.
    tools = re.search(r"swift-tools-version:\s*(\d+)\.(\d+)", (ROOT / "Package.swift").read_text(encoding="utf-8"))
    image_version = re.match(r"swift:(\d+)\.(\d+)", build["image"])
    if tools and image_version:
        c.expect(tuple(map(int, image_version.groups())) >= tuple(map(int, tools.groups())),
                 f"{rel(path)}: {build['image']} is older than Package.swift's swift-tools-version {'.'.join(tools.groups())}")
    build_runs = " ".join(rest for word, rest in build["steps"] if word == "RUN")
    c.expect(re.search(r"swift build -c release .*--static-swift-stdlib", build_runs),
             f"{rel(path)}: the build stage does not run `swift build -c release ... --static-swift-stdlib`")

    runtime_runs = [rest for word, rest in runtime["steps"] if word == "RUN"]
    installs = set()
    for run in runtime_runs:
        for match in re.finditer(r"apt-get install ((?:\S+\s*)+?)(?:&&|$)", run):
            installs |= {w for w in match.group(1).split() if not w.startswith("-")}
    wanted = {"libnghttp2-14", "libssl3", "libpq5", "libmicrohttpd12", "zlib1g", "ca-certificates"}
    c.expect(installs == wanted, f"{rel(path)}: runtime installs {sorted(installs)}, want exactly {sorted(wanted)}")

    # Every COPY from the context exists and survives .dockerignore.
    ignore = [l.strip() for l in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
              if l.strip() and not l.strip().startswith("#")]
    for stage in stages.values():
        for word, rest in stage["steps"]:
            if word not in ("COPY", "ADD"):
                continue
            words = rest.split()
            source_stage = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            sources = [w for w in words if not w.startswith("--")][:-1]
            if source_stage:
                c.expect(source_stage in stages, f"{rel(path)}: COPY --from={source_stage}: no such stage")
                continue
            for source in sources:
                c.expect((ROOT / source).exists(), f"{rel(path)}: COPY {source}: not in the build context (the repository root)")
                c.expect(not dockerignore_excludes(ignore, source.rstrip("/")), f"{rel(path)}: COPY {source}: excluded by .dockerignore")

    user = next((rest for word, rest in runtime["steps"] if word == "USER"), "")
    c.expect(re.fullmatch(r"[1-9]\d*(:\d+)?", user), f"{rel(path)}: USER {user!r} is not a numeric non-root uid")
    c.expect(("STOPSIGNAL", "SIGTERM") in runtime["steps"], f"{rel(path)}: STOPSIGNAL SIGTERM missing")

    # Ports: EXPOSE, the ENV listen addresses and the HEALTHCHECK agree with the compose config.
    compose_config = load_yaml(COMPOSE_DIR / "config.yaml")
    ingress, metrics, _ = relay_settings(compose_config)
    exposed = {int(p.split("/")[0]) for word, rest in runtime["steps"] if word == "EXPOSE" for p in rest.split()}
    c.expect(exposed == {ingress, metrics}, f"{rel(path)}: EXPOSE {sorted(exposed)} != config ports {[ingress, metrics]}")
    env_text = " ".join(rest for word, rest in runtime["steps"] if word == "ENV")
    env = dict(re.findall(r"(\w+)=(\S+)", env_text))
    c.expect(port_of(env.get("APNS_RELAY_INGRESS_LISTEN", DEFAULT_INGRESS)) == ingress, f"{rel(path)}: ENV APNS_RELAY_INGRESS_LISTEN port != {ingress}")
    c.expect(port_of(env.get("APNS_RELAY_METRICS_LISTEN", DEFAULT_METRICS)) == metrics, f"{rel(path)}: ENV APNS_RELAY_METRICS_LISTEN port != {metrics}")
    health = next((rest for word, rest in runtime["steps"] if word == "HEALTHCHECK"), "")
    c.expect("/healthz" in health and f":-{metrics}" in health and "APNS_RELAY_METRICS_LISTEN" in health,
             f"{rel(path)}: HEALTHCHECK should GET /healthz on the metrics port (APNS_RELAY_METRICS_LISTEN, default {metrics})")
    return c.done(f"stages {build['image']} -> {runtime['image']}, static stdlib, 5 libs + CA, uid {user}, "
                  f"COPY sources in context, ports {ingress}/{metrics} agree")


# ---------------------------------------------------------------- Compose

def parse_port(spec):
    """(host ip, host port, container port) of a short-syntax port mapping."""
    parts = str(spec).split("/")[0].split(":")
    if len(parts) == 3:
        return parts[0], int(parts[1]), int(parts[2])
    if len(parts) == 2:
        return "", int(parts[0]), int(parts[1])
    return "", None, int(parts[0])


def compose_mounts(service):
    """[(host path or volume name, container path)] of short-syntax volumes."""
    mounts = []
    for volume in service.get("volumes", []) or []:
        source, _, rest = str(volume).partition(":")
        target = rest.split(":")[0]
        mounts.append((source, target))
    return mounts


def host_path_in_container(mounts, container_path):
    """The host path (relative to the compose dir) that a container path comes from, via bind mounts."""
    container_path = os.path.normpath(container_path)
    for source, target in sorted(mounts, key=lambda m: -len(m[1])):
        if not source.startswith((".", "/")):
            continue
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            return os.path.normpath(os.path.join(COMPOSE_DIR, source, os.path.relpath(container_path, target)))
    return None


def compose_seconds(value):
    match = re.fullmatch(r"(\d+)(s|m)?", str(value))
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1) if match else 0


def check_compose():
    c = Collector()
    path = COMPOSE_DIR / "docker-compose.yml"
    compose = load_yaml(path)
    services = compose.get("services") or {}
    named_volumes = set((compose.get("volumes") or {}).keys())
    for name, service in services.items():
        c.expect(service.get("image") or service.get("build"), f"{rel(path)}: service {name} has neither image nor build")
        image = service.get("image", "")
        c.expect(not image or ":" in image and not image.endswith(":latest"), f"{rel(path)}: service {name}: pin the image tag ({image})")
        for source, target in compose_mounts(service):
            if source.startswith((".", "/")):
                c.expect((COMPOSE_DIR / source).exists(), f"{rel(path)}: {name} mounts {source}, which does not exist")
            else:
                c.expect(source in named_volumes, f"{rel(path)}: {name} mounts volume {source}, not declared under volumes:")
        for dependency in service.get("depends_on") or []:
            c.expect(dependency in services, f"{rel(path)}: {name} depends on unknown service {dependency}")

    relay = services.get("relay")
    if not c.expect(relay, f"{rel(path)}: no relay service"):
        return c.done("")
    build = relay.get("build") or {}
    context = COMPOSE_DIR / build.get("context", ".")
    c.expect((context / build.get("dockerfile", "Dockerfile")).resolve() == (COMPOSE_DIR / "Dockerfile").resolve(),
             f"{rel(path)}: relay does not build deploy/container/Dockerfile")
    c.expect(context.resolve() == ROOT, f"{rel(path)}: the relay's build context should be the repository root")
    c.expect(relay.get("image", "").split(":")[0] == "apns-relay", f"{rel(path)}: relay image should be apns-relay:<tag>")

    # The relay's ports: config.yaml, the environment (which wins), the published ports.
    env = relay.get("environment") or {}
    config_mount = dict((t, s) for s, t in compose_mounts(relay))
    config_target = env.get("APNS_RELAY_CONFIG", "/etc/apns-relay/config.yaml")
    c.expect(config_target in config_mount, f"{rel(path)}: APNS_RELAY_CONFIG={config_target} is not mounted")
    config = load_yaml(COMPOSE_DIR / config_mount.get(config_target, "config.yaml"))
    ingress, metrics, drain = relay_settings(config)
    for variable, port in (("APNS_RELAY_INGRESS_LISTEN", ingress), ("APNS_RELAY_METRICS_LISTEN", metrics)):
        if variable in env:
            c.expect(port_of(env[variable]) == port, f"{rel(path)}: relay {variable}={env[variable]} disagrees with config.yaml port {port}")
            c.expect(str(env[variable]).startswith(("0.0.0.0:", "[::]:")), f"{rel(path)}: relay {variable} must bind every interface in a container")
    published = {parse_port(p)[2] for p in relay.get("ports") or []}
    c.expect(published == {ingress, metrics}, f"{rel(path)}: relay publishes container ports {sorted(published)}, config listens on {[ingress, metrics]}")
    known = known_environment()
    apps = {a["name"] for a in config.get("apps", [])}
    for variable in env:
        check_env_name(variable, apps, known, f"{rel(path)} relay environment", c)
    c.expect(compose_seconds(relay.get("stop_grace_period", "10s")) > drain,
             f"{rel(path)}: relay stop_grace_period {relay.get('stop_grace_period', '10s (default)')} must exceed the drain ({drain} s)")
    spool = (config.get("audit") or {}).get("spool_directory", "/var/lib/apns-relay/spool")
    c.expect(any(t == spool and not s.startswith((".", "/")) for s, t in compose_mounts(relay)),
             f"{rel(path)}: the spool {spool} is not on a named volume (it must outlive the container)")
    # Keys: every app's key_path is a mounted compose secret.
    secrets = compose.get("secrets") or {}
    for app in config.get("apps", []):
        key_path = app.get("key_path", "")
        secret = key_path[len("/run/secrets/"):] if key_path.startswith("/run/secrets/") else None
        c.expect(secret in (relay.get("secrets") or []) and secret in secrets,
                 f"{rel(path)}: app {app.get('name')} key_path {key_path} is not a secret of the relay service")
        if secret in secrets:
            c.expect((COMPOSE_DIR / secrets[secret]["file"]).parent.is_dir(), f"{rel(path)}: secret {secret}'s directory is missing")

    # Prometheus: its config is deploy/prometheus/prometheus.yml, its rule file is mounted where
    # the relative path in that file resolves, and it scrapes relay:<metrics port>.
    prometheus = services.get("prometheus") or {}
    mounts = compose_mounts(prometheus)
    config_arg = next((a.split("=", 1)[1] for a in prometheus.get("command") or [] if str(a).startswith("--config.file=")), "")
    host_config = host_path_in_container(mounts, config_arg) if config_arg else None
    c.expect(host_config and Path(host_config).resolve() == (DEPLOY / "prometheus" / "prometheus.yml").resolve(),
             f"{rel(path)}: prometheus --config.file={config_arg} is not deploy/prometheus/prometheus.yml")
    prometheus_config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    for rule_file in prometheus_config.get("rule_files") or []:
        inside = os.path.normpath(os.path.join(os.path.dirname(config_arg), rule_file))
        host = host_path_in_container(mounts, inside)
        c.expect(host and Path(host).resolve() == RULES.resolve(),
                 f"{rel(path)}: rule file {rule_file} resolves to {inside} in the container, which is not alerts/apns-relay.rules.yml")
    jobs = {job["job_name"]: job for job in prometheus_config.get("scrape_configs") or []}
    job = alert_job()
    relay_job = jobs.get(job)
    if c.expect(relay_job, f"deploy/prometheus/prometheus.yml: no job {job!r} (APNsRelayDown watches up{{job=\"{job}\"}})"):
        targets = [t for sc in relay_job.get("static_configs") or [] for t in sc.get("targets") or []]
        c.expect(targets, f"deploy/prometheus/prometheus.yml: job {job} has no targets")
        for target in targets:
            host, _, port = target.rpartition(":")
            c.expect(host == "relay" and int(port) == metrics,
                     f"deploy/prometheus/prometheus.yml: target {target} is not relay:{metrics} (the compose relay's metrics port)")
        c.expect(relay_job.get("metrics_path", "/metrics") == "/metrics", "deploy/prometheus/prometheus.yml: the relay serves /metrics")
    alertmanager = services.get("alertmanager") or {}
    alertmanager_ports = {parse_port(p)[2] for p in alertmanager.get("ports") or []}
    for manager in (prometheus_config.get("alerting") or {}).get("alertmanagers") or []:
        for sc in manager.get("static_configs") or []:
            for target in sc.get("targets") or []:
                host, _, port = target.rpartition(":")
                c.expect(host in services and int(port) in alertmanager_ports | {9093} and host == "alertmanager",
                         f"deploy/prometheus/prometheus.yml: alertmanager target {target} is not the compose alertmanager")
    # Alertmanager's config is mounted and every route names a receiver it defines.
    am_config_arg = next((a.split("=", 1)[1] for a in alertmanager.get("command") or [] if str(a).startswith("--config.file=")), "")
    am_host = host_path_in_container(compose_mounts(alertmanager), am_config_arg)
    if c.expect(am_host and os.path.isfile(am_host), f"{rel(path)}: alertmanager --config.file={am_config_arg} is not a mounted file"):
        am = load_yaml(am_host)
        receivers = {r["name"] for r in am.get("receivers") or []}
        routes = [am.get("route") or {}]
        while routes:
            route = routes.pop()
            if "receiver" in route:
                c.expect(route["receiver"] in receivers, f"{rel(am_host)}: route receiver {route['receiver']} is not defined")
            routes.extend(route.get("routes") or [])
        severities = set()
        for group in load_yaml(RULES)["groups"]:
            severities |= {r.get("labels", {}).get("severity") for r in group["rules"] if "alert" in r}
        page = any('severity="page"' in m for r in (am.get("route") or {}).get("routes") or [] for m in r.get("matchers") or [])
        c.expect("page" not in severities or page, f"{rel(am_host)}: no route for severity=\"page\", which the rules use")

    # Grafana: provisioning mounted, the data source is the compose Prometheus, the
    # dashboards provider reads the mounted dashboards/.
    grafana = services.get("grafana") or {}
    gmounts = compose_mounts(grafana)
    provisioning = host_path_in_container(gmounts, "/etc/grafana/provisioning")
    if c.expect(provisioning and os.path.isdir(provisioning), f"{rel(path)}: grafana's /etc/grafana/provisioning is not mounted from a directory"):
        prometheus_port = {parse_port(p)[2] for p in prometheus.get("ports") or []} or {9090}
        sources = [d for f in sorted(Path(provisioning, "datasources").glob("*.y*ml")) for d in load_yaml(f).get("datasources") or []]
        c.expect(any(re.fullmatch(rf"http://prometheus:({'|'.join(map(str, prometheus_port))})/?", d.get("url", ""))
                     and d.get("type") == "prometheus" for d in sources),
                 f"{rel(path)}: no Grafana data source points at http://prometheus:{sorted(prometheus_port)}")
        providers = [p for f in sorted(Path(provisioning, "dashboards").glob("*.y*ml")) for p in load_yaml(f).get("providers") or []]
        c.expect(providers, f"{rel(path)}: no Grafana dashboard provider")
        for provider in providers:
            container_dir = (provider.get("options") or {}).get("path", "")
            host_dir = host_path_in_container(gmounts, container_dir)
            ok = c.expect(host_dir and Path(host_dir).resolve() == (ROOT / "dashboards").resolve(),
                          f"{rel(path)}: dashboard provider path {container_dir} is not the mounted dashboards/")
            if ok:
                import json
                boards = sorted(Path(host_dir).glob("*.json"))
                c.expect(boards, "dashboards/: no dashboard JSON")
                for board in boards:
                    try:
                        json.loads(board.read_text(encoding="utf-8"))
                    except ValueError as error:
                        c.expect(False, f"{rel(board)}: {error}")
    return c.done(f"{len(services)} services with image/build, relay ports {ingress}/{metrics} = config = published = "
                  f"scrape target, rules/alertmanager/grafana mounts resolve")


# ---------------------------------------------------------------- Kubernetes

def k8s_documents():
    documents = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in load_all(path):
            if isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion", "").startswith("kustomize."):
                continue
            if isinstance(doc, dict) and doc.get("kind"):
                documents.append((path, doc))
    return documents


def find(documents, kind, name=None):
    return [(p, d) for p, d in documents if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_kubernetes():
    c = Collector()
    documents = k8s_documents()
    configmaps = {d["metadata"]["name"]: d for _, d in find(documents, "ConfigMap")}
    secrets = {d["metadata"]["name"]: d for _, d in find(documents, "Secret")}
    workloads = find(documents, "Deployment") + find(documents, "StatefulSet")
    c.expect(find(documents, "Deployment"), "deploy/kubernetes: no Deployment")
    summary = []
    for path, workload in workloads:
        where = f"{rel(path)} {workload['kind']}"
        pod = workload["spec"]["template"]
        spec = pod["spec"]
        labels = pod["metadata"].get("labels") or {}
        c.expect(selects(workload["spec"]["selector"]["matchLabels"], labels), f"{where}: selector does not match the pod labels")
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        claim_names = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates") or []}
        relay = next((x for x in spec["containers"] if x["name"] == "relay"), None)
        if not c.expect(relay, f"{where}: no container named relay"):
            continue
        env = {e["name"]: e for e in relay.get("env") or []}
        mounts = {m["mountPath"]: m["name"] for m in relay.get("volumeMounts") or []}
        for container in spec.get("initContainers", []) + spec["containers"]:
            for mount in container.get("volumeMounts") or []:
                c.expect(mount["name"] in volumes or mount["name"] in claim_names,
                         f"{where}: {container['name']} mounts {mount['name']}, which is no volume")
            c.expect((container.get("resources") or {}).get("requests"), f"{where}: {container['name']} has no resource requests")
            c.expect(container.get("image", "").split(":")[0].split("/")[-1] == "apns-relay",
                     f"{where}: {container['name']} image {container.get('image')} is not apns-relay")
        # The configuration the relay reads: the ConfigMap mounted at APNS_RELAY_CONFIG's directory.
        config_path = (env.get("APNS_RELAY_CONFIG") or {}).get("value") or "/etc/apns-relay/config.yaml"
        config_volume = volumes.get(mounts.get(os.path.dirname(config_path), ""), {})
        configmap = configmaps.get((config_volume.get("configMap") or {}).get("name"))
        if not c.expect(configmap and os.path.basename(config_path) in configmap["data"],
                        f"{where}: {config_path} is not a key of a ConfigMap mounted at {os.path.dirname(config_path)}"):
            continue
        config = yaml.safe_load(configmap["data"][os.path.basename(config_path)])
        ingress, metrics, drain = relay_settings(config)
        for variable, port in (("APNS_RELAY_INGRESS_LISTEN", ingress), ("APNS_RELAY_METRICS_LISTEN", metrics)):
            value = (env.get(variable) or {}).get("value")
            if value:
                c.expect(port_of(value) == port, f"{where}: {variable}={value} disagrees with the ConfigMap's port {port}")
        known = known_environment()
        apps = {a["name"] for a in config.get("apps") or []}
        for variable in env:
            check_env_name(variable, apps, known, f"{where} env", c)
        ports = {p["name"]: p["containerPort"] for p in relay.get("ports") or []}
        c.expect(sorted(ports.values()) == sorted([ingress, metrics]),
                 f"{where}: container ports {ports} != config ports {[ingress, metrics]}")

        def probe_port(probe_name):
            probe = relay.get(probe_name) or {}
            get = probe.get("httpGet") or {}
            port = get.get("port")
            return get.get("path"), ports.get(port, port if isinstance(port, int) else None)

        for probe_name, wanted_path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            probe_path, port = probe_port(probe_name)
            c.expect(probe_path == wanted_path and port == metrics,
                     f"{where}: {probe_name} is {probe_path} on port {port}, want {wanted_path} on the metrics port {metrics}")
        if relay.get("startupProbe"):
            _, port = probe_port("startupProbe")
            c.expect(port == metrics, f"{where}: startupProbe port {port} is not the metrics port {metrics}")
        grace = spec.get("terminationGracePeriodSeconds", 30)
        c.expect(grace > drain, f"{where}: terminationGracePeriodSeconds {grace} must exceed drain_timeout_seconds {drain}")
        # The spool: where the config puts it, on a volume.
        spool = (env.get("APNS_RELAY_SPOOL_DIRECTORY") or {}).get("value") or (config.get("audit") or {}).get("spool_directory")
        c.expect(spool in mounts, f"{where}: the spool {spool} is not a mounted volume")
        # Secrets: the database URL and the keys come from the one Secret, the keys reach key_path.
        for variable in env.values():
            ref = ((variable.get("valueFrom") or {}).get("secretKeyRef")) or None
            if ref:
                secret = secrets.get(ref["name"])
                c.expect(secret and ref["key"] in (secret.get("stringData") or secret.get("data") or {}),
                         f"{where}: {variable['name']} reads {ref['name']}/{ref['key']}, which secret.example.yaml lacks")
        key_files = {}
        for volume in volumes.values():
            if "secret" in volume:
                secret = secrets.get(volume["secret"]["secretName"])
                keys = (secret or {}).get("stringData") or (secret or {}).get("data") or {}
                for item in volume["secret"].get("items") or []:
                    c.expect(item["key"] in keys, f"{where}: volume {volume['name']} takes {item['key']}, which secret.example.yaml lacks")
                    key_files[item["path"]] = item["key"]
        for app in config.get("apps") or []:
            key_path = (env.get(f"APNS_RELAY_APP_{env_name_for_app(app['name'])}_KEY_PATH") or {}).get("value") or app.get("key_path", "")
            directory, name = os.path.split(key_path)
            c.expect(directory in mounts and name in key_files,
                     f"{where}: app {app['name']} key_path {key_path} is not a mounted key file (have {sorted(key_files)} via the init container)")
        summary.append(f"{workload['kind']} probes on {metrics}, grace {grace} s > drain {drain} s")

    # The StatefulSet variant runs the Deployment's pod but for the spool volume.
    deployments, statefulsets = find(documents, "Deployment"), find(documents, "StatefulSet")
    if deployments and statefulsets:
        import copy
        pod = copy.deepcopy(deployments[0][1]["spec"]["template"])
        pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "spool"]
        c.expect(pod == statefulsets[0][1]["spec"]["template"],
                 f"{rel(statefulsets[0][0])}: pod template differs from deployment.yaml's (other than the spool volume)")
        c.expect(statefulsets[0][1]["spec"]["selector"] == deployments[0][1]["spec"]["selector"],
                 f"{rel(statefulsets[0][0])}: selector differs from the Deployment's")

    pod_labels = deployments[0][1]["spec"]["template"]["metadata"]["labels"] if deployments else {}
    container_ports = {}
    if deployments:
        for container in deployments[0][1]["spec"]["template"]["spec"]["containers"]:
            container_ports.update({p["name"]: p["containerPort"] for p in container.get("ports") or []})
    services = {d["metadata"]["name"]: d for _, d in find(documents, "Service")}
    job = alert_job()
    service = services.get(job)
    if c.expect(service, f"deploy/kubernetes: no Service named {job!r} (the ServiceMonitor's job label, watched by APNsRelayDown)"):
        c.expect(selects(service["spec"]["selector"], pod_labels), f"Service {job}: selector does not match the relay pods")
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            c.expect(target in container_ports or target in container_ports.values(),
                     f"Service {job}: targetPort {target} is no container port ({container_ports})")
    for path, monitor in find(documents, "ServiceMonitor"):
        matched = [s for s in services.values() if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"].get("labels") or {})]
        c.expect([s["metadata"]["name"] for s in matched] == [job],
                 f"{rel(path)}: selects Services {[s['metadata']['name'] for s in matched]}, want exactly [{job}]")
        for endpoint in monitor["spec"]["endpoints"]:
            names = {p.get("name") for s in matched for p in s["spec"]["ports"]}
            c.expect(endpoint.get("port") in names, f"{rel(path)}: endpoint port {endpoint.get('port')} is not a port of the Service")
            service_ports = {p.get("name"): p for s in matched for p in s["spec"]["ports"]}
            target = (service_ports.get(endpoint.get("port")) or {}).get("targetPort")
            c.expect(target == "metrics" or target == container_ports.get("metrics"),
                     f"{rel(path)}: endpoint port {endpoint.get('port')} does not lead to the relay's metrics port")
            c.expect(endpoint.get("path", "/metrics") == "/metrics", f"{rel(path)}: the relay serves /metrics")
    for path, pdb in find(documents, "PodDisruptionBudget"):
        c.expect(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), f"{rel(path)}: selector does not match the relay pods")
    for path, hpa in find(documents, "HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        c.expect(find(documents, target["kind"], target["name"]), f"{rel(path)}: scales {target['kind']}/{target['name']}, which is not defined")
        c.expect(hpa["spec"].get("minReplicas", 1) >= 2, f"{rel(path)}: minReplicas below 2 leaves no relay during a rollout or drain")

    # kustomization.yaml lists every manifest but the Secret example and the component's.
    kustomization = load_yaml(K8S / "kustomization.yaml")
    listed = set(kustomization.get("resources") or [])
    for name in listed:
        c.expect((K8S / name).exists(), f"deploy/kubernetes/kustomization.yaml: {name} does not exist")
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    c.expect(on_disk <= listed, f"deploy/kubernetes/kustomization.yaml: does not list {sorted(on_disk - listed)}")
    c.expect("secret.example.yaml" not in listed, "deploy/kubernetes/kustomization.yaml: must not apply secret.example.yaml")
    images = {i["name"] for i in kustomization.get("images") or []}
    c.expect("apns-relay" in images, "deploy/kubernetes/kustomization.yaml: no images: entry for apns-relay")
    component = load_yaml(K8S / "persistent-spool" / "kustomization.yaml")
    for name in component.get("resources") or []:
        c.expect((K8S / "persistent-spool" / name).exists(), f"deploy/kubernetes/persistent-spool: {name} does not exist")
    return c.done("; ".join(summary) + f"; Service/ServiceMonitor/PDB/HPA consistent, job {job!r}")


def check_kubernetes_schema():
    try:
        import kubernetes_validate
    except ImportError:
        raise Skipped("Python package kubernetes-validate not installed")
    c = Collector()
    versions = ["1.29.0", "1.37.0"]
    count = 0
    for path, doc in k8s_documents():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # CRDs: no schema in the package; check_kubernetes covers them
        for version in versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                c.expect(False, f"{rel(path)} {doc['kind']}/{doc['metadata'].get('name')} (Kubernetes {version}): "
                         f"{error.message} at {'/'.join(map(str, error.path))}")
            except Exception as error:  # SchemaNotFoundError and friends
                c.expect(False, f"{rel(path)} {doc['kind']} (Kubernetes {version}): {type(error).__name__} {error}")
        count += 1
    return c.done(f"{count} resources valid (strict) against Kubernetes {' and '.join(v.rsplit('.', 1)[0] for v in versions)}")


CHECKS = {
    "yaml": check_yaml,
    "systemd-unit": check_systemd_unit,
    "dockerfile": check_dockerfile,
    "compose": check_compose,
    "kubernetes": check_kubernetes,
    "kubernetes-schema": check_kubernetes_schema,
}


def main(argv):
    if len(argv) != 2 or argv[1] not in CHECKS:
        print(f"usage: {argv[0]} {{{','.join(CHECKS)}}}", file=sys.stderr)
        return 2
    try:
        print(CHECKS[argv[1]]())
        return 0
    except Skipped as skipped:
        print(skipped)
        return SKIP
    except Problems as problems:
        for problem in problems.problems:
            print(problem)
        return 1
    except Exception as error:  # a file missing or shaped unlike the check expects
        print(f"{type(error).__name__}: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
