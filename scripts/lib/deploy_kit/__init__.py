"""The deployment kit (deploy/) checks by artifact, run through scripts/lib/deploy_checks.py."""
