-- The role Grafana's audit data source logs in as: it may read the audit table
-- and the counts the stale-token ratio and trap panels read (migrations 0007
-- and 0009; app, trap, time, counts) and nothing else (apns_dead_tokens holds raw device tokens), and a query of
-- its own (Explore) cannot hold the database for long. Run by the audit-reader
-- service of docker-compose.yml once the relay has migrated the schema;
-- idempotent. Elsewhere, run the same with your own password.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'grafana_audit') THEN
        CREATE ROLE grafana_audit LOGIN PASSWORD 'grafana_audit';
    END IF;
END
$$;
ALTER ROLE grafana_audit SET statement_timeout = '10s';
-- The panels are short index walks, but a never-run branch (the slowest sends'
-- fallback) can push a plan's estimated cost over jit_above_cost: JIT then
-- spends seconds compiling for a query that runs in a millisecond (3.3 s of
-- 3.3 s over 7 days; docs/performance.md).
ALTER ROLE grafana_audit SET jit = off;
GRANT CONNECT ON DATABASE apns_relay TO grafana_audit;
GRANT USAGE ON SCHEMA public TO grafana_audit;
GRANT SELECT ON apns_audit TO grafana_audit;
GRANT SELECT ON apns_audit_token_minutes TO grafana_audit;
GRANT SELECT ON apns_audit_token_hours TO grafana_audit;
GRANT SELECT ON apns_audit_trap_5min TO grafana_audit;
GRANT SELECT ON apns_audit_trap_hours TO grafana_audit;
