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
