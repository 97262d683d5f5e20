-- "Slowest sends" for one app (issue 28): the panel reads sends of a second or
-- more from the slow end of apns_audit_slow (0006) and checks each one's app
-- in the heap. With every app selected the first 50 are the slowest; with one
-- app the walk passes every slower send of the other apps first: 3 s over
-- 7 days at a million rows a day (docs/performance.md, "The audit dashboard
-- over 7 days"). This index starts at the app, so a single app's slowest
-- sends are the first entries of its own range in each partition (Merge
-- Append + LIMIT). Like apns_audit_slow it holds only sends of a second or
-- more: an insert of a faster send pays nothing for it.
--
-- Like 0004 and 0006 it is built on every partition and holds inserts while
-- it builds (3.5 s on 7 million rows, two busy cores).

CREATE INDEX IF NOT EXISTS apns_audit_slow_app ON apns_audit (app, latency_ms DESC, recorded_at) WHERE latency_ms >= 1000;
