-- Why sends were retried in the last 24 hours: reasons seen on retried sends' attempts.
SELECT attempt ->> 'reason' AS reason, count(*) AS attempts, count(DISTINCT id) AS sends
FROM apns_audit, jsonb_array_elements(attempt_log) AS attempt
WHERE retried
  AND recorded_at > now() - interval '24 hours'
  AND attempt ->> 'reason' IS NOT NULL
GROUP BY 1
ORDER BY attempts DESC;
