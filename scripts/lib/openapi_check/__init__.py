"""scripts/check-openapi, by concern: the spec (spec, examples), offline
checks of it (spec_offline), HTTP (http_client), verdicts (checks,
conformance), and the live checks against a running relay (live_context,
live_routes, live_valid, live_invalid, live_documented); cli runs them."""
