-- Indexes behind the audit dashboard (dashboards/apns-relay-audit.json), whose
-- panels filter on recorded_at with Grafana's $__timeFilter: each reads only
-- the daily partitions its time range overlaps, and within them only the
-- index entries of the rows it shows or counts. Measured on a million rows by
-- Tests/AuditTests/AuditDashboardTests.swift.
--
-- CREATE INDEX on the partitioned table builds one index per partition and
-- holds inserts while it runs: about 10 s for these on a million rows, on two
-- busy cores. Afterwards each insert maintains them too: 300,000 rows took
-- 7.4 s instead of 6.0-6.7 s.

-- "Recent failed sends": newest first, stops after the panel's limit however
-- rare failures are.
CREATE INDEX apns_audit_failed ON apns_audit (recorded_at DESC) WHERE outcome <> 'success';
-- Trap hits over a time range, by app and trap: index-only over the few rows
-- that hit a trap (the GIN index answers "which rows hit trap X", not "when").
CREATE INDEX apns_audit_trap_time ON apns_audit (recorded_at) INCLUDE (app, trap_ids) WHERE trap_ids <> '{}';
-- "Slowest sends" in a time range: read from the slow end, the range checked
-- in the index.
CREATE INDEX apns_audit_latency ON apns_audit (latency_ms DESC, recorded_at);
-- The stale-token ratio counts every device send in the range, so it reads
-- them all (through apns_audit_time); a covering index for it measured little
-- faster and would cost every insert nearly a whole index more.
