-- What happened to this push? Every attempt's status, reason and timing for one apns-id.
-- :apns_id  the apns-id the backend got back (lowercase UUID)
SELECT recorded_at, app, environment, operation, outcome, status, reason, error_type, trap_ids,
       attempts, retried, latency_ms, attempt_log, token_fingerprint, channel_id, snapshot_id, caller, trace_id
FROM apns_audit
WHERE apns_id = :'apns_id'
ORDER BY recorded_at DESC;
