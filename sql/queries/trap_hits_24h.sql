-- Which traps fired in the last 24 hours, per app: the silent-failure modes worth a look.
SELECT app, trap AS trap_id, count(*) AS hits, max(recorded_at) AS last_hit
FROM apns_audit, unnest(trap_ids) AS trap
WHERE trap_ids <> '{}'
  AND recorded_at > now() - interval '24 hours'
GROUP BY app, trap
ORDER BY hits DESC;
