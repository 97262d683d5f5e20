-- The slowest sends of the last hour (latency includes retries and backoff).
SELECT recorded_at, app, operation, latency_ms, attempts, outcome, status, reason, apns_id
FROM apns_audit
WHERE recorded_at > now() - interval '1 hour'
ORDER BY latency_ms DESC
LIMIT 20;
