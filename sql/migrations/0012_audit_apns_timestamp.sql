-- APNs' `timestamp` of a 410 Unregistered answer (the last time APNs knew the
-- token valid), on the send's own row. A repeat of an idempotent send whose
-- answer was never recorded (the relay stopped first) is answered from its
-- audit row; APNs clients read that answer's `timestamp` to decide whether a
-- token registered since is still dead, so the row keeps the one APNs gave.
-- apns_dead_tokens keeps only the newest per token.
--
-- Nullable with no default: a catalog change on every partition, no rewrite
-- (rows written before it, and every send but a 410, hold NULL).

ALTER TABLE apns_audit ADD COLUMN apns_timestamp timestamptz;
