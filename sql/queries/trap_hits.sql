-- Which traps fired recently, per app: the silent-failure modes worth a look.
-- :since  how far back, as an interval (e.g. '24 hours', '1 hour')
SELECT app, trap AS trap_id, count(*) AS hits, max(recorded_at) AS last_hit
FROM apns_audit, unnest(trap_ids) AS trap
WHERE trap_ids <> '{}'
  AND recorded_at > now() - :'since'::interval
GROUP BY app, trap
ORDER BY hits DESC;
