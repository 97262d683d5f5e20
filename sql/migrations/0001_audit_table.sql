-- The audit table: one row per logical send (one apns-id), partitioned by day
-- on recorded_at. recorded_at is set by the relay when the send finishes, so a
-- row replayed from the disk spool keeps its key and lands exactly once.

CREATE TABLE apns_audit (
    id                uuid             NOT NULL,
    recorded_at       timestamptz      NOT NULL,
    started_at        timestamptz      NOT NULL,
    finished_at       timestamptz      NOT NULL,
    apns_id           text             NOT NULL,
    apns_unique_id    text,
    trace_id          text,
    app               text             NOT NULL,
    environment       text             NOT NULL,
    operation         text             NOT NULL,
    push_type         text,
    priority          smallint,
    topic             text,
    token_fingerprint text,
    channel_id        text,
    snapshot_id       text,
    surface_id        text,
    outcome           text             NOT NULL,
    status            smallint,
    reason            text,
    error_type        text,
    trap_ids          text[]           NOT NULL DEFAULT '{}',
    attempts          smallint         NOT NULL,
    retried           boolean          NOT NULL,
    latency_ms        double precision NOT NULL,
    attempt_log       jsonb            NOT NULL DEFAULT '[]',
    payload_bytes     integer          NOT NULL,
    caller            text,
    relay_instance    text             NOT NULL,
    PRIMARY KEY (id, recorded_at)
) PARTITION BY RANGE (recorded_at);

-- Rows outside every daily partition (a spool replayed after its day was
-- dropped, a clock far off) land here instead of failing the batch.
CREATE TABLE apns_audit_default PARTITION OF apns_audit DEFAULT;

-- "What happened to this push?"
CREATE INDEX apns_audit_apns_id ON apns_audit (apns_id);
-- "Everything sent to this token lately."
CREATE INDEX apns_audit_token ON apns_audit (token_fingerprint, recorded_at DESC) WHERE token_fingerprint IS NOT NULL;
-- Time-window scans per app (trap hits, stale ratio, slowest sends).
CREATE INDEX apns_audit_app_time ON apns_audit (app, recorded_at DESC);
CREATE INDEX apns_audit_time ON apns_audit (recorded_at DESC);
-- Only sends that hit a trap or were retried are interesting to those queries.
CREATE INDEX apns_audit_traps ON apns_audit USING gin (trap_ids) WHERE trap_ids <> '{}';
CREATE INDEX apns_audit_retried ON apns_audit (recorded_at DESC) WHERE retried;

-- Creates the daily partitions from `from_day` for `days` days; idempotent.
CREATE FUNCTION apns_audit_ensure_partitions(from_day date, days integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    day date;
    created integer := 0;
    partition_name text;
BEGIN
    FOR offset_days IN 0 .. days - 1 LOOP
        day := from_day + offset_days;
        partition_name := 'apns_audit_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(partition_name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF apns_audit FOR VALUES FROM (%L) TO (%L)',
                partition_name, day::timestamptz AT TIME ZONE 'UTC', (day + 1)::timestamptz AT TIME ZONE 'UTC');
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END;
$$;

-- Drops daily partitions whose whole day is older than `keep_days`; returns how many.
CREATE FUNCTION apns_audit_drop_partitions(keep_days integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    partition record;
    dropped integer := 0;
    cutoff date := (now() AT TIME ZONE 'UTC')::date - keep_days;
BEGIN
    FOR partition IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'apns_audit'::regclass AND c.relname ~ '^apns_audit_p[0-9]{8}$'
    LOOP
        IF to_date(substring(partition.relname FROM 13), 'YYYYMMDD') < cutoff THEN
            EXECUTE format('DROP TABLE %I', partition.relname);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END;
$$;
