"""A resolver that stops answering: serve runs in a mount namespace of its
own (`unshare --mount`, needs root) whose /etc/resolv.conf names a DNS
server of the campaign's (`options timeout:30 attempts:2`: glibc's
`getaddrinfo` waits a minute and more for each name) and whose /etc/hosts
does not name localhost, so the APNs origins (`localhost:PORT`, the mock's
certificate names it) and Postgres are looked up through that server.
Postgres is named as a list of two servers, as a conninfo with a standby
names them (`standby.invalid:PORT,localhost:PORT`, both through a cuttable
proxy): the first is a name the server says does not exist, so the relay
connects to the second. The mock APNs sends GOAWAY every
few streams, so the relay connects again and again.

The server answers first: serve starts, migrates and sends. Then it stops
answering (queries are read and dropped), the relay's Postgres connections
are reset (the proxy cut and restored at once) and sends go on; then
SIGTERM. Then the server answers again and serve starts again on the same
spool.

Oracle: while the resolver is silent every send is answered within its
send deadline and 5 s (200 through a connection still up, or 504 Timeout;
never held for `getaddrinfo`'s minute); /healthz answers within 2 s; the
drain ends with exit 0 within drain_timeout_seconds + 10 s; after the
restart every send answered before has exactly one audit row, and a new
send is answered 200."""

import shutil
import socket
import struct
import threading
import time
import urllib.parse
import random

from . import bodies, traffic
from .pgproxy import CuttableProxy
from .relay import Options, Relay

COMPONENT = "resolver"
# A loopback address of its own: 127.0.0.1:53 and 127.0.0.53/54 may be a
# local resolver's.
ADDRESS = "127.53.0.1"
SEND_DEADLINE_SECONDS = 8
DRAIN_TIMEOUT_SECONDS = 15


class Resolver:
    """A DNS server on ADDRESS:53 (UDP) that answers `localhost` with
    127.0.0.1 (A; no AAAA), every other name NXDOMAIN, or, silenced,
    answers nothing."""

    def __init__(self):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((ADDRESS, 53))
        self.answering = threading.Event()
        self.answering.set()
        self.queries = 0
        self.dropped = 0
        self.names = set()  # every name asked, answering or not
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stopped:
            try:
                query, peer = self.socket.recvfrom(4096)
            except OSError:
                return
            self.queries += 1
            name = self.question(query)[0]
            if name is not None:
                self.names.add(name)
            if not self.answering.is_set():
                self.dropped += 1
                continue
            answer = self.answer(query)
            if answer:
                self.socket.sendto(answer, peer)

    @staticmethod
    def question(query):
        """The query's one question: (name, type, its bytes), or Nones."""
        if len(query) < 12:
            return None, None, None
        _, _, questions = struct.unpack("!HHH", query[:6])
        if questions != 1:
            return None, None, None
        labels, offset = [], 12
        while offset < len(query) and query[offset] != 0:
            length = query[offset]
            labels.append(query[offset + 1:offset + 1 + length].decode("ascii", "replace").lower())
            offset += 1 + length
        offset += 1
        if offset + 4 > len(query):
            return None, None, None
        return ".".join(labels), struct.unpack("!H", query[offset:offset + 2])[0], query[12:offset + 4]

    @staticmethod
    def answer(query):
        name, qtype, question = Resolver.question(query)
        if name is None:
            return None
        identifier = struct.unpack("!H", query[:2])[0]
        if name != "localhost":
            return struct.pack("!HHHHHH", identifier, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
        if qtype != 1:
            return struct.pack("!HHHHHH", identifier, 0x8180, 1, 0, 0, 0) + question  # no AAAA
        record = struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton("127.0.0.1")
        return struct.pack("!HHHHHH", identifier, 0x8180, 1, 1, 0, 0) + question + record

    def stop(self):
        self.stopped = True
        self.socket.close()


def wrapper(directory, binary):
    """A script that runs `binary` in a mount namespace whose resolv.conf
    names the campaign's server and whose hosts file names nothing."""
    resolv = directory / "resolv.conf"
    resolv.write_text(f"nameserver {ADDRESS}\noptions timeout:30 attempts:2\n")
    hosts = directory / "hosts"
    hosts.write_text("# no localhost here: the relay's names are looked up through the campaign's DNS server\n")
    script = directory / "serve-in-namespace.sh"
    script.write_text(
        "#!/bin/sh\n"
        "exec unshare --mount sh -c 'mount --bind \"$1\" /etc/resolv.conf && mount --bind \"$2\" /etc/hosts && shift 2 && exec \"$@\"' "
        f"sh '{resolv}' '{hosts}' '{binary}' \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def apns_id(body):
    """The apns-id of an answer: a 200's, or the one an error envelope names."""
    if isinstance(body, dict):
        if body.get("apnsId"):
            return body["apnsId"].lower()
        error = body.get("error")
        if isinstance(error, dict) and error.get("apnsId"):
            return error["apnsId"].lower()
    return None


def run(context):
    tally = context.tally
    case = "sends, a Postgres reconnect and a drain while the resolver does not answer"
    rng = random.Random(f"{context.seed}-resolver")
    try:
        resolver = Resolver()
    except OSError as error:
        tally.violation(COMPONENT, "harness error", case, f"cannot listen on {ADDRESS}:53 (needs root): {error}")
        return
    target = urllib.parse.urlsplit(context.database_url)
    proxy = CuttableProxy(target.hostname, target.port or 5432).start()

    def by_name(url):
        # Two servers by name: libpq's list syntax, each name looked up by the relay within its bound.
        proxied = urllib.parse.urlsplit(proxy.url(url))
        user = proxied.netloc.rsplit("@", 1)[0] + "@" if "@" in proxied.netloc else ""
        servers = f"standby.invalid:{proxied.port},localhost:{proxied.port}"
        return urllib.parse.urlunsplit((proxied.scheme, user + servers, proxied.path, proxied.query, proxied.fragment))

    options = Options(serve_database_url=by_name, apns_host="localhost", mock_goaway_after=3,
                      send_deadline_seconds=SEND_DEADLINE_SECONDS, drain_timeout_seconds=DRAIN_TIMEOUT_SECONDS)
    relay = Relay(context.binary, context.database_url, options=options, label="fuzz-dns")
    relay.serve_binary = wrapper(relay.directory, context.serve_binary or context.binary)
    answered = {}  # apns-id -> (status, error type)
    answers = []  # (phase, status, error type, seconds)
    slow = []
    lock = threading.Lock()

    def send(phase):
        token = bodies.token(rng)
        status, body, _, seconds = traffic.post(relay.port, "/v1/send", traffic.single_document(rng, token), relay.keys["backend"],
                                                timeout=120)
        tally.status(COMPONENT, status)
        tally.cases[COMPONENT] += 1
        kind = traffic.error_type(body) if isinstance(body, dict) else ""
        with lock:
            identifier = apns_id(body)
            if identifier:
                answered[identifier] = (status, kind)
            answers.append((phase, status, kind, seconds))
            if phase == "silent" and seconds > SEND_DEADLINE_SECONDS + 5:
                slow.append(f"{status} {kind} after {seconds:.1f} s")
        return status, kind, seconds

    try:
        relay.start()
        # The resolver answers: names are looked up, the relay sends (and connects again after each GOAWAY).
        first = [send("answering") for _ in range(8)]
        failed = [f"{status} {kind}" for status, kind, _ in first if status != 200]
        if failed:
            tally.violation(COMPONENT, "sends failed while the resolver answered", case, ", ".join(failed[:5]))
        # Silent: every lookup from here waits on glibc's minute.
        resolver.answering.clear()
        proxy.cut()
        proxy.restore()
        threads = [threading.Thread(target=send, args=("silent",), daemon=True) for _ in range(12)]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        health = relay.healthz()
        health_seconds = time.monotonic() - started
        if health != 200 or health_seconds > 2:
            tally.violation(COMPONENT, "/healthz held by the resolver", case, f"/healthz answered {health} after {health_seconds:.1f} s")
        for thread in threads:
            thread.join(150)
        for line in slow[:5]:
            tally.violation(COMPONENT, "send held past its deadline by the resolver", case,
                            f"answered {line} (send deadline {SEND_DEADLINE_SECONDS} s)")
        silent = [(status, seconds) for phase, status, _, seconds in answers if phase == "silent"]
        if len(silent) != len(threads):
            tally.violation(COMPONENT, "send not answered", case, f"{len(silent)} of {len(threads)} sends answered while the resolver was silent")
        # Every finished send counted once: the counter agrees with the answers (checked against the rows below).
        counted = relay.metric_sum("apns_relay_sends_total")
        if counted != len(answered):
            tally.violation(COMPONENT, "counters disagree with answers", case,
                            f"sum(apns_relay_sends_total) = {counted} for {len(answered)} sends answered with an apns-id")
        # SIGTERM while the resolver is still silent: the drain ends within its bound.
        started = time.monotonic()
        status = relay.kill(15, timeout=DRAIN_TIMEOUT_SECONDS + 60)
        drain_seconds = time.monotonic() - started
        if status != 0 or drain_seconds > DRAIN_TIMEOUT_SECONDS + 10:
            tally.violation(COMPONENT, "drain held by the resolver", case,
                            f"exit {status} after {drain_seconds:.1f} s (bound {DRAIN_TIMEOUT_SECONDS} + 10 s); log: {relay.log_tail(3)}")
        # The resolver answers again: serve starts on the same spool and records every answered send once.
        resolver.answering.set()
        relay.start_serve_again()
        after, after_kind, _ = send("recovered")
        if after != 200:
            tally.violation(COMPONENT, "no send once the resolver answered again", case, f"{after} {after_kind}")
        rows = traffic.wait_until(
            lambda: (lambda counts: counts if all(counts.get(i, 0) >= 1 for i in answered) else None)(
                traffic.rows_by_apns_id(relay.database_url, relay.instance)), 60, interval=0.3) \
            or traffic.rows_by_apns_id(relay.database_url, relay.instance)
        if sum(rows.values()) != len(answered):
            tally.violation(COMPONENT, "rows disagree with answers", case,
                            f"{sum(rows.values())} audit rows of the instance for {len(answered)} sends answered with an apns-id")
        missing = [i for i in answered if rows.get(i, 0) == 0]
        duplicates = [i for i in answered if rows.get(i, 0) > 1]
        for identifier in missing[:5]:
            tally.violation(COMPONENT, "answered send without an audit row", case, f"apns-id {identifier} {answered[identifier]}")
        for identifier in duplicates[:5]:
            tally.violation(COMPONENT, "answered send with two audit rows", case, f"apns-id {identifier}: {rows[identifier]} rows")
        if resolver.dropped == 0:
            tally.violation(COMPONENT, "the resolver was never asked while silent", case,
                            "nothing was checked: the relay looked no name up while the server was silent")
        if "standby.invalid" not in resolver.names:
            tally.violation(COMPONENT, "the server list's first name was never looked up", case,
                            f"nothing was checked of the list: names asked {sorted(resolver.names)}")
        tally.figure(COMPONENT, f"{case}: answered {len(answered)}; while silent {sum(1 for s, _ in silent if s == 200)} × 200, "
                                f"{sum(1 for s, _ in silent if s != 200)} other, slowest {max((t for _, t in silent), default=0):.1f} s, "
                                f"/healthz {health_seconds:.2f} s, drain exit {status} in {drain_seconds:.1f} s, "
                                f"queries {resolver.queries} ({resolver.dropped} dropped; names {', '.join(sorted(resolver.names))}), rows missing {len(missing)} duplicates {len(duplicates)}")
    except Exception as error:  # noqa: BLE001 - a harness failure is a loud failure, not a pass
        tally.violation(COMPONENT, "harness error", case, f"{type(error).__name__}: {error}; log: {relay.log_tail(3)}")
    finally:
        relay.stop()
        proxy.stop()
        resolver.stop()
        if not context.keep:
            shutil.rmtree(relay.directory, ignore_errors=True)
