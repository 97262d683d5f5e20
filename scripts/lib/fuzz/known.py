"""Answers the relay cannot change, because libmicrohttpd 0.9.75 (the
version the relay builds against) gives them before the relay sees the
request: its own HTML page for what it cannot parse, a bare LF read as a
line end, a header value cut at a NUL byte. They are listed here by case
and kind, printed as KNOWN, and fail the run only with --strict; anything
else those cases do (a crash, a 5xx, a success where a refusal is due, a
status that does not fit) is still a violation."""

from . import verdicts

MHD_PAGE = "libmicrohttpd 0.9.75 refuses it with its own HTML page before the relay sees the request"
BARE_LF = "libmicrohttpd 0.9.75 reads a bare LF as a line end (RFC 9112 2.2 lets a recipient do so)"
NUL_CUT = ("libmicrohttpd 0.9.75 cuts a header value at a NUL byte, so the relay sees the key without what follows; "
           "no auth bypass: the right key is still needed")

FRAMING_PAGES = [
    "Content-Length list", "bad chunk size", "chunk size overflow", "negative Content-Length", "Content-Length with plus sign",
    "Content-Length in hex", "Content-Length past 2^64", "NUL in a header name", "header without colon", "huge header value",
    "twenty thousand headers", "huge URI", "HTTP/2.0 in the request line", "HTTP/1.1 in lowercase", "HTTP/9.9",
    "garbage request line", "method with odd token", "space in the path", "NUL in the path",
]

KNOWN = {("framing", name, verdicts.NON_JSON): MHD_PAGE for name in FRAMING_PAGES}
KNOWN[("framing", "bare LF line endings", verdicts.WRONG_STATUS)] = BARE_LF


def reason(component, kind, case):
    """Why this violation is a known limit of the HTTP library, or None."""
    if (component, case, kind) in KNOWN:
        return KNOWN[(component, case, kind)]
    if component == "auth" and case.endswith("with very long key") and kind == verdicts.NON_JSON:
        return MHD_PAGE + " (431: the head is over its connection memory)"
    if component == "auth" and case.endswith("with NUL and more after the key") and kind == verdicts.ACCEPTED_BAD_KEY:
        return NUL_CUT
    # An Idempotency-Key header with a line break never reaches the relay
    # (libmicrohttpd's page), and one with a NUL reaches it cut short: the
    # relay sees a valid shorter key, so it sends (or answers 422 when the
    # shorter key was used with another body), exactly as for that key.
    key_case = component in ("edges", "mutation") and ("idempotency key " in case.lower() or "idempotency-key " in case.lower())
    if key_case and kind == verdicts.NON_JSON and ("\\n" in case or "\\r\\n" in case):
        return MHD_PAGE + " (a line break in the Idempotency-Key header)"
    if key_case and kind == verdicts.WRONG_STATUS and "\\x00" in case:
        return NUL_CUT.replace("the key", "the Idempotency-Key").replace("; no auth bypass: the right key is still needed", "")
    return None
