"""scripts/check-openapi's command line: the arguments, then the offline
checks, then (unless --examples-only) the live ones in the order (a) routes,
(b) valid requests, (c) bad requests, (d) the documentation's examples."""

import argparse
import pathlib
import sys
import time

import yaml

from .checks import Checks
from .live_context import LiveContext, load_snapshot
from .live_documented import documented_examples
from .live_invalid import invalid
from .live_routes import routes
from .live_valid import valid
from .spec import Spec
from .spec_offline import run_offline

REPO = pathlib.Path(__file__).resolve().parents[3]


def parse_arguments(description):
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="the relay's ingress, e.g. http://127.0.0.1:8080")
    parser.add_argument("--health-base-url", help="where /healthz and /readyz are served (default --base-url)")
    parser.add_argument("--api-key", help="a key scoped to --app")
    parser.add_argument("--admin-key", help="an admin key")
    parser.add_argument("--app", help="an app the relay serves")
    parser.add_argument("--environment", default="development", choices=["development", "production"])
    parser.add_argument("--token", help="device token for the sends (default: 64 random hex digits)")
    parser.add_argument("--snapshot", default=str(REPO / "docs/examples/active-progress.json"),
                        help="a liveActivity LiveSurfaceSnapshot for the sends (default: %(default)s)")
    parser.add_argument("--spec", default=str(REPO / "docs/openapi.yaml"), help="default: %(default)s")
    parser.add_argument("--guide", default=str(REPO / "docs/api.md"),
                        help="markdown whose <!-- schema: #/pointer --> blocks are checked too (default: %(default)s)")
    parser.add_argument("--max-body-bytes", type=int, help="the relay's ingress.max_body_bytes: also check 413")
    parser.add_argument("--expect-success", action="store_true",
                        help="sends must succeed (use against a mock APNs that accepts the token)")
    parser.add_argument("--exercise-kill-switch", action="store_true",
                        help="also disable retries before re-enabling them (affects every send meanwhile)")
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds per request (default %(default)s)")
    parser.add_argument("--examples-only", action="store_true",
                        help="no relay: only check the examples in --spec and --guide")
    args = parser.parse_args()
    if not args.examples_only:
        missing = [f"--{n.replace('_', '-')}" for n in ("base_url", "api_key", "admin_key", "app") if not getattr(args, n)]
        if missing:
            parser.error("missing " + ", ".join(missing))
    return args


def main(description):
    """Exit 0 when every check passed, 1 when one failed, 2 on a usage or loading problem."""
    args = parse_arguments(description)
    try:
        spec = Spec(args.spec)
    except (OSError, yaml.YAMLError, ValueError, KeyError) as error:
        print(f"check-openapi: cannot load {args.spec}: {error}", file=sys.stderr)
        return 2

    checks = Checks()
    try:
        snapshot = load_snapshot(args.snapshot)
        live = None if args.examples_only else LiveContext(args, spec, checks, snapshot)
    except (OSError, ValueError) as error:
        print(f"check-openapi: {error}", file=sys.stderr)
        return 2
    run_offline(spec, checks, snapshot, args.snapshot, args.guide)
    if live is not None:
        started = time.monotonic()
        routes(live)
        valid(live)
        invalid(live)
        documented_examples(live)
        print(f"({time.monotonic() - started:.1f} s against {args.base_url})")
    total = checks.passed + checks.failed
    print(f"check-openapi: {total} checks, {checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0
