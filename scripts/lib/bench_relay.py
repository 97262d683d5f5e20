"""The relay configuration the out-of-process benchmarks start `apns-relay serve` with.

Shared by scripts/lib/send_bench.py and scripts/lib/overload_bench.py: one app
(app-a, key BENCHKEY01 of team BENCHTEAM1) on the mock's development origin,
one API key, logs at error level.
"""
import hashlib


def write_relay_config(path, *, instance, mock_port, ca_file, key_path, api_key, spool_directory,
                       database_url="", ingress_lines="", connections_per_origin=2, drain_timeout_seconds=5):
    """Writes the YAML to `path`; `ingress_lines` are added under `ingress:` (indented by the caller)."""
    with open(path, "w") as f:
        f.write(f"""instance: {instance}
ingress:
  listen: 127.0.0.1:0
{ingress_lines}
metrics:
  listen: 127.0.0.1:0
apns:
  connections_per_origin: {connections_per_origin}
  origins:
    development: 127.0.0.1:{mock_port}
  ca_file: {ca_file}
apps:
  - name: app-a
    bundle_id: com.example.a
    team_id: BENCHTEAM1
    key_id: BENCHKEY01
    key_path: {key_path}
    environments: [development]
api_keys:
  - name: bench
    sha256: {hashlib.sha256(api_key.encode()).hexdigest()}
audit:
  database_url: "{database_url}"
  spool_directory: {spool_directory}
shutdown:
  drain_timeout_seconds: {drain_timeout_seconds}
logging:
  level: error
""")


EXAMPLE_CONFIG = "deploy/apns-relay.example.yaml"


def write_shipped_config(path, *, root, instance, mock_port, ca_file, key_path, api_key, spool_directory,
                         database_url="", log_level=None, tracing=None):
    """Writes the shipped example configuration (deploy/apns-relay.example.yaml)
    with its placeholders filled in, as a user would run it: listeners on
    free loopback ports, the bench app and API key in place of the example's,
    the mock APNs as origin, the spool and database given here.

    Everything else stays as shipped (logs at info, tracing.exporter log, the
    audit on, journal_sync interval, retries, limits), except the example
    key's rate limit (1000/s, burst 2000), which would refuse a benchmark's
    load with 429s: it is lifted for the bench key. `log_level` and
    `tracing` (a dict merged into `tracing:`) make the quieter variants."""
    import os
    import yaml

    with open(os.path.join(root, EXAMPLE_CONFIG)) as f:
        config = yaml.safe_load(f)
    config["instance"] = instance
    config["ingress"]["listen"] = "127.0.0.1:0"
    config["metrics"]["listen"] = "127.0.0.1:0"
    config["apns"]["origins"] = {"development": f"127.0.0.1:{mock_port}", "production": f"127.0.0.1:{mock_port}"}
    config["apns"]["ca_file"] = ca_file
    app = dict(config["apps"][0])
    app.update(name="app-a", bundle_id="com.example.a", team_id="BENCHTEAM1", key_id="BENCHKEY01", key_path=key_path,
               environments=["development"])
    config["apps"] = [app]
    entry = dict(config["api_keys"][0])
    entry.update(name="bench", sha256=hashlib.sha256(api_key.encode()).hexdigest(), apps=["app-a"],
                 rate_per_second=1_000_000, burst=1_000_000)
    config["api_keys"] = [entry]
    config["audit"]["database_url"] = database_url
    config["audit"]["spool_directory"] = spool_directory
    if log_level:
        config["logging"]["level"] = log_level
    if tracing:
        config["tracing"].update(tracing)
    with open(path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)


def add_apns_ingress(path, *, tls, certificate_file, private_key_file, provider_key):
    """Turns on the HTTP/2 APNs ingress in the configuration at `path` (as
    written by write_shipped_config): `apns_ingress.listen` on a free loopback
    port, TLS with the given certificate or cleartext HTTP/2 with prior
    knowledge, the example's limits as shipped; and names `provider_key` (a
    dict: key_id, team_id, public_key_file) on its one API key entry, so the
    bench key's rate limit and apps apply to provider-token callers too."""
    import yaml

    with open(path) as f:
        config = yaml.safe_load(f)
    config["apns_ingress"].update(listen="127.0.0.1:0", tls=tls, certificate_file=certificate_file, private_key_file=private_key_file)
    config["api_keys"][0]["provider_key"] = dict(provider_key)
    with open(path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
