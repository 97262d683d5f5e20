-- Cheaper index work per audit row (issue 15). Postgres shares the relay's
-- cores, and most of its CPU per row goes to index inserts: a successful send
-- entered six B-trees (scripts/audit-pg-cost, docs/performance.md "Postgres'
-- CPU per audit row"). Two of them are now hash indexes and one is partial.
-- Every dashboard panel and on-call query still reads only the rows it needs,
-- through an index (Tests/AuditTests/AuditDashboardTests.swift,
-- OnCallQueryTests.swift). Nothing a relay writes or reads changes: an older
-- relay (a rollback) runs against this schema as before.
--
-- Like 0004, this builds indexes on every partition and holds inserts while
-- it runs (the relays' writers wait, then catch up from their queues and
-- spools): a few seconds per million rows.

-- Look-ups by apns-id and by token fingerprint are equalities only: hash
-- indexes answer them (and the dashboard's "apns-id OR fingerprint" as a
-- bitmap OR) for much less than a B-tree insert costs on random text keys (a
-- descent comparing strings under the database's collation). A token's recent
-- sends are sorted after the look-up: a token has few.
DROP INDEX apns_audit_apns_id;
CREATE INDEX apns_audit_apns_id ON apns_audit USING hash (apns_id);
DROP INDEX apns_audit_token;
CREATE INDEX apns_audit_token ON apns_audit USING hash (token_fingerprint) WHERE token_fingerprint IS NOT NULL;

-- "Slowest sends" reads the slow end of the latency order: only sends of a
-- second or more are indexed (a few in a hundred), and the panel takes the
-- rest of its 50 from the range (apns_audit_time) only when fewer than 50
-- were that slow.
DROP INDEX apns_audit_latency;
CREATE INDEX apns_audit_slow ON apns_audit (latency_ms DESC, recorded_at) WHERE latency_ms >= 1000;
