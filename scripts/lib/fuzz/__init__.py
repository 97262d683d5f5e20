"""The attack campaign against a running apns-relay: schemathesis over
docs/openapi.yaml, a seeded mutation fuzzer over valid bodies, raw HTTP
framing probes and Authorization variants, then the audit check (every
answered apns-id has exactly one row). `scripts/fuzz` runs it; `scripts/test`
runs a bounded campaign. Entry point: `python3 -m fuzz` with scripts/lib on
PYTHONPATH."""
