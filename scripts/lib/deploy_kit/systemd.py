"""deploy/systemd/apns-relay.service: hardening, stop timeout against the drain,
variables the relay reads, key paths that LoadCredential= provides."""

import re

from .common import DEPLOY, EXAMPLE_CONFIG, Collector, rel, load_yaml, relay_settings, known_environment, check_env_name


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
    values = {}
    for key, value in ((k, v) for s, k, v in entries if s == "Service"):
        values.setdefault(key, []).append(value)

    def one(key):
        return values.get(key, [None])[-1]

    check_hardening(c, unit_path, values, one)
    config = load_yaml(EXAMPLE_CONFIG)
    _, _, drain = relay_settings(config)
    stop = systemd_seconds(one("TimeoutStopSec") or "90")
    c.expect(stop > drain, f"{rel(unit_path)}: TimeoutStopSec={one('TimeoutStopSec')} must exceed the drain ({drain} s)")

    exec_start = one("ExecStart") or ""
    c.expect(re.search(r"apns-relay serve\b", exec_start), f"{rel(unit_path)}: ExecStart does not run `apns-relay serve`")
    c.expect(any("check-config" in v for v in values.get("ExecStartPre", [])),
             f"{rel(unit_path)}: no ExecStartPre running check-config")
    environment = check_environment(c, unit_path, env_path, values, config)
    check_spool(c, unit_path, environment)
    return c.done(f"hardening, TimeoutStopSec {stop:g} s > drain {drain} s, {len(environment)} Environment= and "
                  f"env-file names known, key paths match LoadCredential=")


def check_hardening(c, unit_path, values, one):
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


def check_environment(c, unit_path, env_path, values, config):
    """Environment= and the env file: only variables the relay reads, and each
    per-app key path handed over by a LoadCredential= of the same name."""
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
    return environment


def check_spool(c, unit_path, environment):
    """The spool is under the StateDirectory, which outlives restarts."""
    spool = environment.get("APNS_RELAY_SPOOL_DIRECTORY", "")
    c.expect(spool.startswith("%S/apns-relay") or spool.startswith("/var/lib/apns-relay"),
             f"{rel(unit_path)}: the spool ({spool or 'default'}) is not in the StateDirectory")
