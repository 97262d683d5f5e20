"""schemathesis against docs/openapi.yaml, limited to what the relay
promises: no server error (not_a_server_error) and answers that match the
documented schemas (response_schema_conformance). Its requests and answers
come back as a HAR file, so the same envelope check and apns-id count as
the other components apply to them."""

import base64
import json
import math
import pathlib
import subprocess
import sys

from . import verdicts, wire

SPEC = pathlib.Path(__file__).resolve().parents[3] / "docs/openapi.yaml"
CHECKS = "not_a_server_error,response_schema_conformance"


def available():
    """None when schemathesis 4 is importable, else what is wrong (the CLI flags used here are 4.x's)."""
    try:
        import schemathesis
    except ImportError:
        return "schemathesis is not installed (scripts/test installs 4.32.5)"
    version = getattr(schemathesis, "__version__", "?")
    return None if version.startswith("4.") else f"schemathesis {version} found; 4.x is needed (scripts/lib/common.sh pins 4.32.5)"


def run(campaign, seed, examples, seconds, workdir):
    relay = campaign.relay
    har = pathlib.Path(workdir) / "schemathesis.har"
    arguments = [
        sys.executable, "-m", "schemathesis.cli", "run", str(SPEC), "--url", f"http://127.0.0.1:{relay.port}",
        "-H", f"Authorization: Bearer {relay.keys['backend']}", "--checks", CHECKS, "--seed", str(seed),
        "--max-examples", str(examples), "--workers", "1", "--phases", "examples,coverage,fuzzing", "--no-shrink",
        "--request-timeout", "30", "--suppress-health-check", "all", "--warnings", "off",
        "--report", "har", "--report-har-path", str(har), "--exclude-operation-id", "setRetrySwitch",
    ]
    if seconds:
        # schemathesis takes whole seconds only (`--seconds 600` arrives as 600.0).
        arguments += ["--max-time", str(max(1, math.ceil(seconds)))]
    result = subprocess.run(arguments, capture_output=True, text=True, cwd=workdir)
    output = result.stdout + result.stderr
    (pathlib.Path(workdir) / "schemathesis.log").write_text(output)
    entries = read_har(har)
    for entry in entries:
        campaign.tally.case("schemathesis")
        response = entry["response"]
        case = f"{entry['method']} {entry['url'][:100]}"
        campaign.tally.answer(response)
        campaign.tally.status("schemathesis", response.status)
        if entry["path"] in ("/healthz", "/readyz"):
            continue
        for kind, detail in verdicts.answer_problems(response):
            campaign.tally.violation("schemathesis", kind, case, detail)
    failures = failed_checks(output)
    if result.returncode == 1 and not failures:
        failures = ["failures this parser could not name"]
    for failure in failures:
        campaign.tally.violation("schemathesis", "schemathesis check", failure, "see schemathesis.log")
    if result.returncode not in (0, 1) or not entries:
        campaign.tally.violation("schemathesis", "schemathesis did not run", f"exit {result.returncode}",
                                 output.strip().splitlines()[-1] if output.strip() else "no output")
    if relay.died(0.5):
        campaign.tally.crash("schemathesis", "(during the run; see schemathesis.log)", relay.exit_description())
        relay.restart_serve()
    campaign.health("schemathesis")
    return len(entries)


def failed_checks(output):
    """The titles of the failures schemathesis reports ('- Server error', ...) with their operation."""
    failures = []
    operation = None
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith("_") and stripped.endswith("_") and " " in stripped.strip("_ "):
            operation = stripped.strip("_ ")
        elif stripped.startswith("- ") and operation and len(stripped) < 120 and not stripped.startswith("- -"):
            if stripped[2:3].isupper():
                failures.append(f"{operation}: {stripped[2:]}")
    return sorted(set(failures))


def read_har(path):
    """[{method, url, path, response: wire.Response}] from schemathesis' HAR report."""
    if not path.exists():
        return []
    document = json.loads(path.read_text())
    found = []
    for entry in document.get("log", {}).get("entries", []):
        request, answer = entry.get("request", {}), entry.get("response", {})
        content = answer.get("content", {}) or {}
        text = content.get("text") or ""
        body = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode("utf-8", "surrogatepass")
        headers = [(h["name"].lower(), h["value"]) for h in answer.get("headers", [])]
        status = answer.get("status") or 0
        url = request.get("url", "")
        path = "/" + url.split("/", 3)[3].split("?")[0] if url.count("/") >= 3 else url
        if status:
            found.append({"method": request.get("method", ""), "url": url, "path": path,
                          "response": wire.Response(status, answer.get("statusText", ""), headers, body)})
    return found
