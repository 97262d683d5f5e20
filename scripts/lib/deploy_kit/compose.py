"""deploy/container/docker-compose.yml and what it mounts: the relay's ports
against config.yaml and the Prometheus targets, the rule file, Alertmanager
and Grafana."""

import json
import os
import re
from pathlib import Path

from .common import ROOT, DEPLOY, RULES, COMPOSE_DIR, Collector, rel, load_yaml, port_of, relay_settings, known_environment, check_env_name, alert_job


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
    check_services(c, path, compose, services)
    relay = services.get("relay")
    if not c.expect(relay, f"{rel(path)}: no relay service"):
        return c.done("")
    ingress, metrics = check_relay_service(c, path, compose, relay)
    prometheus = services.get("prometheus") or {}
    prometheus_config = check_prometheus(c, path, prometheus, metrics)
    check_alertmanager(c, path, services, prometheus_config)
    check_grafana(c, path, services, prometheus)
    return c.done(f"{len(services)} services with image/build, relay ports {ingress}/{metrics} = config = published = "
                  f"scrape target, rules/alertmanager/grafana mounts resolve")


def check_services(c, path, compose, services):
    """Every service has a pinned image or a build, mounts what exists, depends on services that do."""
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


def check_relay_service(c, path, compose, relay):
    """The relay's build, ports (config.yaml, the environment, the published ports), environment, stop
    grace against the drain, spool volume and key secrets; returns its (ingress, metrics) ports."""
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
    return ingress, metrics


def check_prometheus(c, path, prometheus, metrics):
    """Prometheus' config is deploy/prometheus/prometheus.yml, its rule file is mounted where the
    relative path in that file resolves, and it scrapes relay:<metrics port>; returns that config."""
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
    return prometheus_config


def check_alertmanager(c, path, services, prometheus_config):
    """Prometheus alerts the compose Alertmanager, whose config is mounted and whose every route names a receiver it defines."""
    alertmanager = services.get("alertmanager") or {}
    alertmanager_ports = {parse_port(p)[2] for p in alertmanager.get("ports") or []}
    for manager in (prometheus_config.get("alerting") or {}).get("alertmanagers") or []:
        for sc in manager.get("static_configs") or []:
            for target in sc.get("targets") or []:
                host, _, port = target.rpartition(":")
                c.expect(host in services and int(port) in alertmanager_ports | {9093} and host == "alertmanager",
                         f"deploy/prometheus/prometheus.yml: alertmanager target {target} is not the compose alertmanager")
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


def check_grafana(c, path, services, prometheus):
    """Grafana's provisioning is mounted, its data source is the compose Prometheus, and the
    dashboards provider reads the mounted dashboards/, whose every file is JSON."""
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
                boards = sorted(Path(host_dir).glob("*.json"))
                c.expect(boards, "dashboards/: no dashboard JSON")
                for board in boards:
                    try:
                        json.loads(board.read_text(encoding="utf-8"))
                    except ValueError as error:
                        c.expect(False, f"{rel(board)}: {error}")
