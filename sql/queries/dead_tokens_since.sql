-- Tokens APNs called dead or wrong for one app since a time: what the backend should prune.
-- :app    the app name
-- :since  a timestamp, e.g. '2026-11-22 00:00Z'
SELECT token, token_fingerprint, environment, reason, apns_timestamp, first_seen, last_seen
FROM apns_dead_tokens
WHERE app = :'app'
  AND last_seen >= :'since'::timestamptz
ORDER BY last_seen DESC;
