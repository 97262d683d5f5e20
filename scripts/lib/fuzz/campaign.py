"""What every component shares: send one case, notice a crash (and start the
relay again so the campaign goes on), check each answer against the
promises, and count the apns-ids answered for the audit check."""

import sys
import time

from . import verdicts, wire


class Campaign:
    def __init__(self, relay, tally, verbose=False):
        self.relay = relay
        self.tally = tally
        self.verbose = verbose

    def note(self, text):
        print(text, file=sys.stderr, flush=True)

    def run(self, component, case, data, *, method="GET", expect=1, timeout=40.0, pause_after=None, tail=b"",
            check=None, allowed=None, allowed_5xx=(), close_ok=False):
        """Sends `data` on a fresh connection; returns the Exchange.

        check(exchange) may return more (kind, detail) problems. A connection
        that ends without an answer is a violation unless `close_ok`."""
        self.tally.case(component)
        result = wire.exchange(self.relay.port, data, expect=expect, timeout=timeout, method=method,
                               pause_after=pause_after, tail=tail)
        if self.crashed(component, case, result):
            return result
        problems = []
        if not result.responses:
            self.tally.status(component, 0)
        for response in result.responses:
            self.tally.status(component, response.status)
            self.tally.answer(response)
            problems += verdicts.answer_problems(response, allowed=allowed, allowed_5xx=allowed_5xx)
        if not result.responses and not close_ok:
            how = "timed out" if result.timed_out else (result.error or "closed without an answer")
            problems.append((verdicts.NO_ANSWER, how))
        if check:
            problems += check(result) or []
        for kind, detail in problems:
            self.tally.violation(component, kind, case, detail)
            if self.verbose:
                self.note(f"  {component}: {kind}: {case}: {detail}")
        return result

    def crashed(self, component, case, result):
        """True (and the relay restarted) when the relay died on this case."""
        grace = 1.0 if (not result.responses or result.error) else 0.0
        if not self.relay.died(grace):
            return False
        detail = f"{self.relay.exit_description()}; log: {self.relay.log_tail(3)}"
        self.tally.crash(component, case, detail)
        self.note(f"  CRASH in {component} on {case}: {self.relay.exit_description()}; restarting the relay")
        self.relay.restart_serve()
        return True

    def health(self, component):
        """After a component: the process is alive and /healthz is 200."""
        if not self.relay.alive():
            self.tally.crash(component, "(between cases)", self.relay.exit_description())
            self.relay.restart_serve()
            return
        status = self.relay.healthz()
        if status != 200:
            self.tally.violation(component, verdicts.UNHEALTHY, "GET /healthz after the component", f"status {status}")


class Budget:
    """Stops a loop after `cases` iterations or `seconds`, whichever comes first."""

    def __init__(self, cases, seconds):
        self.cases = cases
        self.deadline = time.monotonic() + seconds if seconds else None
        self.done = 0

    def more(self):
        if self.cases is not None and self.done >= self.cases:
            return False
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return False
        self.done += 1
        return True
