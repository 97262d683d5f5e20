"""Checks of the dashboards and the observability stack around them
(deploy_checks.py runs them as `dashboards` and `tracing`):

    dashboards   every data source a dashboard names (panels, queries, variables,
                 trace links) is provisioned with that uid and type, in compose
                 and on Kubernetes; dashboard links lead to a dashboard in dashboards/
    tracing      the relay's OTLP endpoint reaches the collector, the collector's
                 pipeline reaches Tempo, Grafana's Tempo and audit data sources
                 point at the compose services, the reader role is the one created
"""

import json
import re
from pathlib import Path
from urllib.parse import urlparse

from deploy_kit.common import COMPOSE_DIR, ROOT, Collector, Problems, load_yaml, rel
from deploy_kit.compose import compose_mounts, host_path_in_container
from deploy_kit.kubernetes import k8s_documents

import yaml

DASHBOARDS = ROOT / "dashboards"


def dashboards():
    return {path: json.loads(path.read_text(encoding="utf-8")) for path in sorted(DASHBOARDS.glob("*.json"))}


def compose_datasources():
    compose = load_yaml(COMPOSE_DIR / "docker-compose.yml")
    grafana = (compose.get("services") or {}).get("grafana") or {}
    provisioning = host_path_in_container(compose_mounts(grafana), "/etc/grafana/provisioning")
    files = sorted(Path(provisioning, "datasources").glob("*.y*ml")) if provisioning else []
    return [d for f in files for d in load_yaml(f).get("datasources") or []]


def kubernetes_datasources():
    sources = []
    for _, doc in k8s_documents():
        labels = (doc.get("metadata") or {}).get("labels") or {}
        if doc["kind"] == "ConfigMap" and str(labels.get("grafana_datasource")) == "1":
            for text in (doc.get("data") or {}).values():
                sources += yaml.safe_load(text).get("datasources") or []
    return sources


def references(board):
    """(where, datasource reference) of every panel, query and variable, and (where, uid) of trace links."""
    refs, links = [], []
    panels = list(board.get("panels") or [])
    while panels:
        panel = panels.pop(0)
        panels += panel.get("panels") or []
        where = f"panel {panel.get('title')!r}"
        if isinstance(panel.get("datasource"), dict):
            refs.append((where, panel["datasource"]))
        for target in panel.get("targets") or []:
            if isinstance(target.get("datasource"), dict):
                refs.append((f"{where} query {target.get('refId')}", target["datasource"]))
        for override in (panel.get("fieldConfig") or {}).get("overrides") or []:
            for prop in override.get("properties") or []:
                for link in prop.get("value") or [] if prop.get("id") == "links" else []:
                    if link.get("internal"):
                        links.append((f"{where} link {link.get('title')!r}", link["internal"].get("datasourceUid")))
    for variable in (board.get("templating") or {}).get("list") or []:
        if isinstance(variable.get("datasource"), dict):
            refs.append((f"variable ${variable.get('name')}", variable["datasource"]))
    return refs, links


def check_dashboards():
    c = Collector()
    boards = dashboards()
    c.expect(len(boards) >= 2, "dashboards/: want the metrics and the audit dashboard")
    uids = {board.get("uid"): path for path, board in boards.items()}
    stacks = {"compose": compose_datasources(), "kubernetes": kubernetes_datasources()}
    for stack, sources in stacks.items():
        by_uid = {s.get("uid"): s for s in sources}
        c.expect(len(by_uid) == len(sources), f"{stack}: two data sources share a uid")
        c.expect(sum(bool(s.get("isDefault")) for s in sources) <= 1, f"{stack}: more than one default data source")
        types = {s.get("type") for s in sources}
        for path, board in boards.items():
            variables = {v.get("name"): v for v in (board.get("templating") or {}).get("list") or [] if v.get("type") == "datasource"}
            refs, links = references(board)
            for where, ref in refs:
                uid, kind = ref.get("uid", ""), ref.get("type")
                variable = re.fullmatch(r"\$\{?(\w+)\}?", uid or "")
                if variable:
                    picker = variables.get(variable.group(1))
                    if not c.expect(picker, f"{rel(path)} {where}: data source ${{{variable.group(1)}}} is no datasource variable"):
                        continue
                    c.expect(picker.get("query") == kind, f"{rel(path)} {where}: type {kind} but ${picker['name']} picks {picker.get('query')}")
                    c.expect(kind in types, f"{rel(path)} {where}: no {kind} data source provisioned for {stack}")
                    current = (picker.get("current") or {}).get("value")
                    if current and stack == "compose":
                        c.expect(by_uid.get(current, {}).get("type") == kind,
                                 f"{rel(path)}: ${picker['name']} defaults to uid {current}, not a provisioned {kind} data source in {stack}")
                else:
                    c.expect(by_uid.get(uid, {}).get("type") == kind, f"{rel(path)} {where}: no {kind} data source with uid {uid} in {stack}")
            for where, uid in links:
                c.expect(uid in by_uid, f"{rel(path)} {where}: links to data source uid {uid}, not provisioned in {stack}")
    for path, board in boards.items():
        for link in board.get("links") or []:
            match = re.match(r"/d/([^/?]+)", link.get("url", ""))
            if link.get("type") == "link" and match:
                c.expect(match.group(1) in uids, f"{rel(path)}: link {link.get('title')!r} leads to dashboard uid {match.group(1)}, not in dashboards/")
    linked = {re.match(r"/d/([^/?]+)", l.get("url", "")).group(1) for b in boards.values() for l in b.get("links") or []
              if re.match(r"/d/([^/?]+)", l.get("url", ""))}
    c.expect(set(uids) <= linked, f"dashboards/: each dashboard should be linked from another (unlinked: {sorted(set(uids) - linked)})")
    return c.done(f"{len(boards)} dashboards: every data source, trace link and dashboard link resolves in compose "
                  f"({len(stacks['compose'])} data sources) and on Kubernetes ({len(stacks['kubernetes'])})")


def host_port(address, default_port=None):
    """(host, port) of "host:port", "http://host:port" or "0.0.0.0:4318"."""
    parsed = urlparse(address if "://" in address else "//" + address)
    return parsed.hostname, parsed.port or default_port


def check_tracing():
    c = Collector()
    compose = load_yaml(COMPOSE_DIR / "docker-compose.yml")
    services = compose.get("services") or {}
    for name in ("otel-collector", "tempo"):
        if not c.expect(name in services, f"docker-compose.yml: no {name} service"):
            return c.done("")

    def mounted_file(service, argument_prefix):
        argument = next((a.split("=", 1)[1] for a in services[service].get("command") or [] if str(a).startswith(argument_prefix)), None)
        host = host_path_in_container(compose_mounts(services[service]), argument) if argument else None
        if c.expect(host and Path(host).is_file(), f"docker-compose.yml: {service} {argument_prefix}{argument} is not a mounted file"):
            return load_yaml(host)
        raise Problems(c.problems)

    collector = mounted_file("otel-collector", "--config=")
    tempo = mounted_file("tempo", "-config.file=")

    # The relay -> the collector's OTLP/HTTP receiver.
    endpoint = (services["relay"].get("environment") or {}).get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    host, port = host_port(endpoint)
    receiver = ((collector.get("receivers") or {}).get("otlp") or {}).get("protocols") or {}
    http_port = host_port((receiver.get("http") or {}).get("endpoint", "0.0.0.0:4318"))[1]
    c.expect(host == "otel-collector" and port == http_port and endpoint.startswith("http://"),
             f"relay OTEL_EXPORTER_OTLP_ENDPOINT={endpoint!r} is not http://otel-collector:{http_port} (the collector's OTLP/HTTP receiver)")

    # The collector's traces pipeline: every component defined, exporting to Tempo's OTLP/gRPC receiver.
    pipeline = ((collector.get("service") or {}).get("pipelines") or {}).get("traces") or {}
    for kind in ("receivers", "processors", "exporters"):
        for component in pipeline.get(kind) or []:
            c.expect(component in (collector.get(kind) or {}), f"otel-collector.yaml: traces pipeline names {kind[:-1]} {component}, not defined")
    c.expect(pipeline.get("receivers") and pipeline.get("exporters"), "otel-collector.yaml: no traces pipeline from a receiver to an exporter")
    tempo_grpc = host_port(((((tempo.get("distributor") or {}).get("receivers") or {}).get("otlp") or {}).get("protocols") or {})
                           .get("grpc", {}).get("endpoint", "0.0.0.0:4317"))[1]
    exporters = [(collector.get("exporters") or {}).get(e) or {} for e in pipeline.get("exporters") or []]
    c.expect(any(host_port(e.get("endpoint", "")) == ("tempo", tempo_grpc) for e in exporters),
             f"otel-collector.yaml: no traces exporter sends to tempo:{tempo_grpc} (Tempo's OTLP/gRPC receiver)")
    storage = ((tempo.get("storage") or {}).get("trace") or {})
    volume_targets = [t for s, t in compose_mounts(services["tempo"]) if not s.startswith((".", "/"))]
    for part in ("wal", "local"):
        path = (storage.get(part) or {}).get("path", "")
        c.expect(any(path.startswith(t.rstrip("/") + "/") for t in volume_targets), f"tempo.yaml: {part} path {path} is not on a named volume")

    # Grafana's Tempo and audit data sources: the compose services.
    sources = {s.get("type"): s for s in compose_datasources()}
    tempo_url = (sources.get("tempo") or {}).get("url", "")
    c.expect(host_port(tempo_url) == ("tempo", (tempo.get("server") or {}).get("http_listen_port")),
             f"Grafana's Tempo data source {tempo_url!r} is not http://tempo:<server.http_listen_port>")
    audit = sources.get("grafana-postgresql-datasource") or {}
    postgres = services.get("postgres") or {}
    database = (postgres.get("environment") or {}).get("POSTGRES_DB")
    c.expect(host_port(audit.get("url", ""), 5432) == ("postgres", 5432), f"Grafana's audit data source url {audit.get('url')!r} is not postgres:5432")
    c.expect((audit.get("jsonData") or {}).get("database") == database, f"Grafana's audit data source database is not {database}")
    reader = services.get("audit-reader") or {}
    script = next((a for a in reader.get("command") or [] if str(a).endswith(".sql")), "")
    host = host_path_in_container(compose_mounts(reader), script)
    if c.expect(host and Path(host).is_file(), f"docker-compose.yml: audit-reader runs {script!r}, not a mounted file"):
        sql = Path(host).read_text(encoding="utf-8")
        c.expect(re.search(rf"CREATE ROLE {re.escape(audit.get('user', ''))} LOGIN", sql),
                 f"{rel(host)}: does not create the role {audit.get('user')} Grafana logs in as")
        # Exactly the tables the audit dashboard's SQL reads: a panel reading
        # another would fail for want of the grant (the counts behind the
        # stale-token ratio, issue 28), a grant beyond them would open more.
        read = {table for board in dashboards().values() for target in (t for p in board.get("panels", []) for t in p.get("targets", []))
                for table in re.findall(r"\bFROM\s+(apns_\w+)", target.get("rawSql", ""))}
        granted = re.findall(r"GRANT SELECT ON (\w+)", sql)
        c.expect(sorted(granted) == sorted(read), f"{rel(host)}: the reader may SELECT from {sorted(granted)}; the audit dashboard reads {sorted(read)}")
        c.expect(f"PASSWORD '{(audit.get('secureJsonData') or {}).get('password')}'" in sql, f"{rel(host)}: password differs from the data source's")
    return c.done(f"relay -> otel-collector:{http_port} (OTLP/HTTP) -> tempo:{tempo_grpc} (OTLP/gRPC) <- Grafana; "
                  f"audit data source reads {database} as {audit.get('user')} (SELECT on the tables the audit dashboard reads)")

