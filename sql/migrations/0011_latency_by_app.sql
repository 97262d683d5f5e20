-- "Slowest sends" in every case (issue 28). 0006 indexed only sends of a
-- second or more (apns_audit_slow) and 0010 the same per app
-- (apns_audit_slow_app); when fewer than 50 sends of the range took a second
-- (a quiet app, a healthy relay) the panel sorted the rows of its range:
-- 1.1-1.8 s for an app of a tenth of the sends, 4.9-7.9 s for all of them,
-- over 7 days at a million rows a day (docs/performance.md, "The audit
-- dashboard over 7 days").
--
-- This index holds every send, by app and slowest first, with its instant as
-- the last key column. The panel takes each chosen app's 50 slowest in the
-- range, each from the first entries of the app's part of the index in the
-- range's partitions (the instant is checked on the entry, without a visit to
-- the row; Merge Append + Limit), then the 50 slowest of those: whatever the
-- latencies, about 50 entries per app and partition over whole days (81
-- buffers for one app, 406 for five, over the week at 7 million rows). It
-- replaces both partial indexes, whose questions it answers too: an insert
-- enters one latency index where a send of a second or more entered two, but
-- every send now enters it (Postgres' CPU per audit row in
-- docs/performance.md).
--
-- Like 0004, 0006 and 0010 it is built on every partition and holds inserts
-- while it builds (8-15 s on 7 million rows, two busy cores; the relays'
-- writers wait, then catch up from their queues and spools).

CREATE INDEX IF NOT EXISTS apns_audit_app_latency ON apns_audit (app, latency_ms DESC, recorded_at);
DROP INDEX IF EXISTS apns_audit_slow_app;
DROP INDEX IF EXISTS apns_audit_slow;
