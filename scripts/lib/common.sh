# Shared helpers for scripts/test and scripts/demo. Sourced, not run.

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = "0" ]; then "$@"; else sudo "$@"; fi
}

# Debian packages the build and the tests use.
DEBIAN_PACKAGES=(
    pkg-config libnghttp2-dev libssl-dev libpq-dev libmicrohttpd-dev zlib1g-dev
    postgresql postgresql-client prometheus nghttp2-client nghttp2-server openssl curl python3 python3-pip
    haproxy wrk prometheus-alertmanager
)

# Python packages the tests use as independent implementations (schemathesis:
# the fuzz campaign's OpenAPI component, pinned to a version known to install here;
# opentelemetry-proto: OpenTelemetry's own protobuf classes for the OTLP receiver in
# Tests/EndToEndTests/otlp_receiver.py; aioapns: the unmodified APNs client library that
# APNsHTTP2IngressTests sends through the HTTP/2 APNs ingress, scripts/lib/aioapns_client.py;
# httpx with its HTTP/2 extra (h2): the client APNsHTTP2ChannelTests makes APNs' channel and
# broadcast requests with, scripts/lib/httpx_apns_client.py).
PYTHON_PACKAGES=(cryptography jsonschema rfc3339-validator PyYAML kubernetes-validate "schemathesis==4.32.5" "opentelemetry-proto==1.45.2" "aioapns==4.0" "httpx[http2]==0.28.1")
PYTHON_MODULES=(cryptography jsonschema rfc3339_validator yaml kubernetes_validate schemathesis opentelemetry.proto.collector.trace.v1.trace_service_pb2 aioapns "httpx, h2")

install_test_dependencies() {
    local missing=()
    for package in "${DEBIAN_PACKAGES[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing Debian packages: ${missing[*]}"
        if [ "$(id -u)" != "0" ] && ! command -v sudo >/dev/null 2>&1; then
            log "not root and no sudo: install them by hand, or run as root"
            return 1
        fi
        as_root apt-get update -qq
        # `env` because sudo drops the caller's environment. The postgresql
        # package may start a system cluster; the tests never use it.
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    else
        log "Debian packages: all ${#DEBIAN_PACKAGES[@]} present"
    fi
    local index
    for index in "${!PYTHON_MODULES[@]}"; do
        if ! python3 -c "import ${PYTHON_MODULES[$index]}" 2>/dev/null; then
            log "installing Python package ${PYTHON_PACKAGES[$index]}"
            python3 -m pip install --quiet "${PYTHON_PACKAGES[$index]}" \
                || python3 -m pip install --quiet --break-system-packages "${PYTHON_PACKAGES[$index]}"
        fi
    done
}

# perf, for scripts/profile only (scripts/test and scripts/bench do not need it).
install_profiler() {
    command -v perf >/dev/null 2>&1 && return 0
    log "installing Debian package linux-perf (perf)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

postgres_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] || { log "PostgreSQL server binaries not found under /usr/lib/postgresql"; return 1; }
    echo "$dir"
}

# Starts a private cluster: its own data directory and socket directory under
# a temp dir, a free loopback port, trust auth, run as a non-root user. Sets
# APNS_RELAY_PG_DIR, APNS_RELAY_PG_PORT and APNS_RELAY_PG_URL.
start_throwaway_postgres() {
    local bin user
    bin=$(postgres_bin)
    APNS_RELAY_PG_DIR=$(mktemp -d /tmp/apns-relay-pg.XXXXXX)
    APNS_RELAY_PG_PORT=$(free_port)
    if [ "$(id -u)" = "0" ]; then
        user=postgres
        id "$user" >/dev/null 2>&1 || useradd --system --no-create-home "$user"
        chown "$user" "$APNS_RELAY_PG_DIR"
    else
        user=$(id -un)
    fi
    APNS_RELAY_PG_USER=$user
    # Trust auth: the cluster listens on loopback and a socket in a private dir.
    if ! run_as_pg_user "$bin/initdb" -D "$APNS_RELAY_PG_DIR/data" -A trust -U "$user" --no-sync \
        >"$APNS_RELAY_PG_DIR/initdb.log" 2>&1; then
        log "initdb failed:"
        cat "$APNS_RELAY_PG_DIR/initdb.log" >&2
        return 1
    fi
    if ! run_as_pg_user "$bin/pg_ctl" -D "$APNS_RELAY_PG_DIR/data" -l "$APNS_RELAY_PG_DIR/log" -w -t 60 \
        -o "-p $APNS_RELAY_PG_PORT -k $APNS_RELAY_PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
        start >/dev/null; then
        log "Postgres failed to start; its log:"
        cat "$APNS_RELAY_PG_DIR/log" >&2
        return 1
    fi
    run_as_pg_user "$bin/createdb" -h 127.0.0.1 -p "$APNS_RELAY_PG_PORT" -U "$user" apns_relay_test
    APNS_RELAY_PG_URL="postgresql://$user@127.0.0.1:$APNS_RELAY_PG_PORT/apns_relay_test"
    export APNS_RELAY_PG_DIR APNS_RELAY_PG_PORT APNS_RELAY_PG_URL APNS_RELAY_PG_USER
}

run_as_pg_user() {
    if [ "$(id -u)" = "0" ]; then
        runuser -u "$APNS_RELAY_PG_USER" -- "$@"
    else
        "$@"
    fi
}

# Safe to call at any point of start_throwaway_postgres (as an EXIT trap):
# stops the server if it runs and removes the temp dir if it exists.
stop_throwaway_postgres() {
    local status=$?
    if [ -n "${APNS_RELAY_PG_DIR:-}" ] && [ -d "$APNS_RELAY_PG_DIR" ]; then
        if [ -f "$APNS_RELAY_PG_DIR/data/postmaster.pid" ]; then
            run_as_pg_user "$(postgres_bin)/pg_ctl" -D "$APNS_RELAY_PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 \
                || log "pg_ctl stop failed; the temp cluster in $APNS_RELAY_PG_DIR may still run"
        fi
        rm -rf "$APNS_RELAY_PG_DIR"
    fi
    return $status
}
