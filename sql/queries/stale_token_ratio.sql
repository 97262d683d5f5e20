-- Share of device sends per app in the last 24 hours whose token was dead (Unregistered,
-- ExpiredToken: MS020). Above 5% means the backend keeps tokens too long.
SELECT app,
       count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken')) AS dead,
       count(*) AS sends,
       round(count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken'))::numeric / nullif(count(*), 0), 4) AS ratio
FROM apns_audit
WHERE token_fingerprint IS NOT NULL
  AND recorded_at > now() - interval '24 hours'
GROUP BY app
ORDER BY ratio DESC NULLS LAST;
