"""Consistency checks of the deployment kit (deploy/), run by scripts/check-deploy.

    python3 scripts/lib/deploy_checks.py CHECK

prints one line saying what was checked, or the problems found, and exits 0
(passed), 1 (failed) or 3 (skipped: a tool or module this machine lacks).
Each check reads the files the way the tool that runs them would (Compose,
Kubernetes, systemd, Docker, Prometheus) and compares the values that must
agree across them: ports, names, paths, timeouts.

The checks live in scripts/lib/deploy_kit/, one module per artifact; this
file maps check names to them.
"""

import sys

from deploy_kit.common import SKIP, Problems, Skipped
from deploy_kit.compose import check_compose
from deploy_kit.dockerfile import check_dockerfile
from deploy_kit.grafana import check_dashboards, check_tracing
from deploy_kit.kubernetes import check_kubernetes, check_kubernetes_schema
from deploy_kit.systemd import check_systemd_unit
from deploy_kit.yaml_files import check_yaml


CHECKS = {
    "yaml": check_yaml,
    "systemd-unit": check_systemd_unit,
    "dockerfile": check_dockerfile,
    "compose": check_compose,
    "kubernetes": check_kubernetes,
    "kubernetes-schema": check_kubernetes_schema,
    "dashboards": check_dashboards,
    "tracing": check_tracing,
}


def main(argv):
    if len(argv) != 2 or argv[1] not in CHECKS:
        print(f"usage: {argv[0]} {{{','.join(CHECKS)}}}", file=sys.stderr)
        return 2
    try:
        print(CHECKS[argv[1]]())
        return 0
    except Skipped as skipped:
        print(skipped)
        return SKIP
    except Problems as problems:
        for problem in problems.problems:
            print(problem)
        return 1
    except Exception as error:  # a file missing or shaped unlike the check expects
        print(f"{type(error).__name__}: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
