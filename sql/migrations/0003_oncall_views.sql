-- Views behind the dashboards' SQL panels and the runbooks.

-- Trap hits per hour, app and trap id.
CREATE VIEW apns_audit_trap_hits_hourly AS
SELECT date_trunc('hour', recorded_at) AS hour, app, trap AS trap_id, count(*) AS hits
FROM apns_audit, unnest(trap_ids) AS trap
WHERE trap_ids <> '{}'
GROUP BY 1, 2, 3;

-- Share of device sends per hour and app whose token turned out dead (MS020).
-- Above 5% means tokens are kept too long.
CREATE VIEW apns_audit_stale_token_ratio AS
SELECT date_trunc('hour', recorded_at) AS hour, app,
       count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken')) AS dead,
       count(*) AS sends,
       round(count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken'))::numeric / count(*), 4) AS ratio
FROM apns_audit
WHERE token_fingerprint IS NOT NULL
GROUP BY 1, 2;
