-- Everything recently sent to one device or activity token, newest first.
-- :fingerprint  first 12 hex digits of SHA-256 of the token (apns-relay audit token <token> computes it)
SELECT recorded_at, app, operation, outcome, status, reason, trap_ids, attempts, latency_ms, apns_id
FROM apns_audit
WHERE token_fingerprint = :'fingerprint'
  AND recorded_at > now() - interval '7 days'
ORDER BY recorded_at DESC
LIMIT 100;
