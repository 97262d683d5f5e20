"""Many-address flood (issue 27, item 3): idle and header-dribbling sockets
from 21 or more loopback addresses (127.0.0.2 on; Linux routes all of
127/8 to lo, so a socket bound to one reaches the relay on 127.0.0.1),
each address under the per-address cap, together past the relay's global
connection limit, reconnecting whatever the relay closes; meanwhile a
bystander on 127.0.0.1 sends normally, one connection per send.

Oracle: every bystander send is answered 200 and their p99 is under 1 s.
The flood must really have been past the limit (every flood socket
connected at least once), or the run fails rather than pass untested."""

import random
import resource
import select
import shutil
import socket
import threading
import time

from . import traffic
from .relay import Options, Relay

COMPONENT = "flood"
CONNECTION_LIMIT = 256  # the relay keeps max(64, 2 × max_concurrent_requests) connections
PER_ADDRESS = 32  # ingress.max_connections_per_client
P99_BOUND = 1.0


class Flood:
    """Opens `per_address` sockets from each address (even ones idle, odd
    ones dribbling a request head a line every half second), then reopens
    what the relay closes, within `reconnect_budget`, until stop()."""

    def __init__(self, port, addresses, per_address, reconnect_budget):
        self.port, self.addresses, self.per_address, self.reconnect_budget = port, addresses, per_address, reconnect_budget
        self.opened = 0
        self.reconnects = 0
        self.peak = 0
        self.lowest = None  # fewest flood sockets open at once after the first pass
        self.failed_connects = 0
        self.ready = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _connect(self, source, dribbles):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((source, 0))
            sock.settimeout(0.2)  # a full backlog must not stall the flood
            sock.connect(("127.0.0.1", self.port))
            sock.setblocking(False)
            if dribbles:
                sock.send(b"POST /v1/send HTTP/1.1\r\nHost: relay\r\n")
            return sock
        except OSError:
            sock.close()
            self.failed_connects += 1
            return None

    def _run(self):
        sockets = {}  # socket -> (source, dribbles)
        for source in self.addresses:
            for index in range(self.per_address):
                sock = self._connect(source, index % 2 == 1)
                if sock is not None:
                    sockets[sock] = (source, index % 2 == 1)
                    self.opened += 1
        self.peak = len(sockets)
        self.ready.set()
        line = 0
        next_dribble = time.monotonic() + 0.5
        lost = []
        while not self._stopped.is_set():
            readable, _, _ = select.select(list(sockets), [], [], 0.1) if sockets else ([], [], [])
            for sock in readable:
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # closed (or answered and closed): reconnect it
                    lost.append(sockets.pop(sock))
                    sock.close()
            if time.monotonic() >= next_dribble:
                next_dribble += 0.5
                line += 1
                for sock, (source, dribbles) in list(sockets.items()):
                    if dribbles:
                        try:
                            sock.send(f"X-Dribble-{line}: {line}\r\n".encode())
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError:
                            lost.append(sockets.pop(sock))
                            sock.close()
            while lost and self.reconnects < self.reconnect_budget and not self._stopped.is_set():
                source, dribbles = lost.pop()
                sock = self._connect(source, dribbles)
                self.reconnects += 1
                if sock is not None:
                    sockets[sock] = (source, dribbles)
            self.peak = max(self.peak, len(sockets))
            self.lowest = len(sockets) if self.lowest is None else min(self.lowest, len(sockets))
        for sock in sockets:
            sock.close()

    def stop(self):
        self._stopped.set()
        self._thread.join(30)


def raise_open_files(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run(context, addresses_count, per_address, bystander_sends):
    tally = context.tally
    addresses = [f"127.0.0.{2 + index}" for index in range(addresses_count)]
    total = addresses_count * per_address
    case = f"{total} idle/dribbling sockets from {addresses_count} addresses over a {CONNECTION_LIMIT}-connection limit"
    limit = raise_open_files(total + 256)
    if limit < total + 64:
        tally.violation(COMPONENT, "too few file descriptors", case, f"RLIMIT_NOFILE {limit} for {total} sockets")
        return
    relay = Relay(context.binary, context.database_url, serve_binary=context.serve_binary, label="fuzz-flood",
                  options=Options(ingress={"max_concurrent_requests": CONNECTION_LIMIT // 2, "max_connections_per_client": PER_ADDRESS,
                                           "request_timeout_seconds": 15, "connection_timeout_seconds": 60}))
    flood = None
    try:
        relay.start()
        # A persistent attacker: whatever the relay closes is reopened, without end until stop().
        flood = Flood(relay.port, addresses, per_address, reconnect_budget=10**12)
        flood.ready.wait(120)
        rng = random.Random(f"{context.seed}-flood")
        latencies, statuses = [], []
        for _ in range(bystander_sends):
            outcome = traffic.send(relay.port, relay.keys["backend"], rng, timeout=30)
            tally.case(COMPONENT)
            tally.status(COMPONENT, outcome.status)
            statuses.append(outcome)
            latencies.append(outcome.seconds)
        flood.stop()
        ordered = sorted(latencies)
        p99 = ordered[max(0, int(len(ordered) * 0.99 + 0.999999) - 1)]
        median = ordered[len(ordered) // 2]
        answered = sum(1 for outcome in statuses if outcome.status == 200)
        for outcome in [o for o in statuses if o.status != 200][:10]:
            tally.violation(COMPONENT, "bystander send not answered 200", case, f"{outcome.status} {outcome.detail[:200]} after {outcome.seconds:.2f} s")
        if p99 >= P99_BOUND:
            tally.violation(COMPONENT, "bystander p99 over 1 s", case, f"p99 {p99:.3f} s (median {median:.3f} s, slowest {ordered[-1]:.3f} s)")
        if flood.opened < total:
            tally.violation(COMPONENT, "flood not past the limit", case, f"only {flood.opened} of {total} flood sockets connected")
        tally.figure(COMPONENT, f"{case}: flood opened={flood.opened} reconnects={flood.reconnects} open at once {flood.lowest}-{flood.peak}; "
                                f"bystander {answered}/{len(statuses)} answered 200, median {median:.3f} s, p99 {p99:.3f} s, "
                                f"slowest {ordered[-1]:.3f} s (bound {P99_BOUND} s)")
        if relay.stop() not in (0, None):
            tally.violation(COMPONENT, "unclean exit after SIGTERM", case, relay.log_tail(3))
    except Exception as error:  # noqa: BLE001 - a harness failure is a loud failure, not a pass
        tally.violation(COMPONENT, "harness error", case, f"{type(error).__name__}: {error}; log: {relay.log_tail(3)}")
    finally:
        if flood is not None:
            flood.stop()
        relay.stop()
        if not context.keep:
            shutil.rmtree(relay.directory, ignore_errors=True)
