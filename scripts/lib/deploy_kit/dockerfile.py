"""deploy/container/Dockerfile: stages, static stdlib, exactly the runtime
libraries, non-root, COPY sources present and not dropped by .dockerignore, ports."""

import fnmatch
import re

from .common import ROOT, COMPOSE_DIR, DEFAULT_INGRESS, DEFAULT_METRICS, Collector, rel, load_yaml, port_of, relay_settings


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
    stages = dockerfile_stages(dockerfile_instructions(path))
    c.expect(list(stages) == ["build", "runtime"], f"{rel(path)}: stages should be build, runtime (are {list(stages)})")
    build, runtime = stages.get("build", {"image": "", "steps": []}), stages.get("runtime", {"image": "", "steps": []})
    c.expect(re.fullmatch(r"swift:\d+\.\d+-bookworm", build["image"]), f"{rel(path)}: build stage is {build['image']}, not swift:X.Y-bookworm")
    c.expect(runtime["image"] == "debian:bookworm-slim", f"{rel(path)}: runtime stage is {runtime['image']}")
    check_build_stage(c, path, build)
    check_runtime_libraries(c, path, runtime)
    check_copy_sources(c, path, stages)
    user = next((rest for word, rest in runtime["steps"] if word == "USER"), "")
    c.expect(re.fullmatch(r"[1-9]\d*(:\d+)?", user), f"{rel(path)}: USER {user!r} is not a numeric non-root uid")
    c.expect(("STOPSIGNAL", "SIGTERM") in runtime["steps"], f"{rel(path)}: STOPSIGNAL SIGTERM missing")
    ingress, metrics = check_runtime_ports(c, path, runtime)
    return c.done(f"stages {build['image']} -> {runtime['image']}, static stdlib, 5 libs + CA, uid {user}, "
                  f"COPY sources in context, ports {ingress}/{metrics} agree")


def dockerfile_stages(instructions):
    """{stage name: {"image": FROM with ARGs expanded, "steps": [(instruction, rest)]}}, in order."""
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
    return stages


def check_build_stage(c, path, build):
    """The Swift image is no older than Package.swift's tools version and builds release with a static stdlib."""
    tools = re.search(r"swift-tools-version:\s*(\d+)\.(\d+)", (ROOT / "Package.swift").read_text(encoding="utf-8"))
    image_version = re.match(r"swift:(\d+)\.(\d+)", build["image"])
    if tools and image_version:
        c.expect(tuple(map(int, image_version.groups())) >= tuple(map(int, tools.groups())),
                 f"{rel(path)}: {build['image']} is older than Package.swift's swift-tools-version {'.'.join(tools.groups())}")
    build_runs = " ".join(rest for word, rest in build["steps"] if word == "RUN")
    c.expect(re.search(r"swift build -c release .*--static-swift-stdlib", build_runs),
             f"{rel(path)}: the build stage does not run `swift build -c release ... --static-swift-stdlib`")


def check_runtime_libraries(c, path, runtime):
    """The runtime stage installs exactly the C libraries the binary links, and CA certificates."""
    installs = set()
    for run in (rest for word, rest in runtime["steps"] if word == "RUN"):
        for match in re.finditer(r"apt-get install ((?:\S+\s*)+?)(?:&&|$)", run):
            installs |= {w for w in match.group(1).split() if not w.startswith("-")}
    wanted = {"libnghttp2-14", "libssl3", "libpq5", "libmicrohttpd12", "zlib1g", "ca-certificates"}
    c.expect(installs == wanted, f"{rel(path)}: runtime installs {sorted(installs)}, want exactly {sorted(wanted)}")


def check_copy_sources(c, path, stages):
    """Every COPY from the context exists and survives .dockerignore; every COPY --from names a stage."""
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


def check_runtime_ports(c, path, runtime):
    """EXPOSE, the ENV listen addresses and the HEALTHCHECK agree with the compose config; returns its ports."""
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
    return ingress, metrics
