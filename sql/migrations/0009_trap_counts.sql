-- Trap hits per app, trap and 5 minutes (and hour), behind the two trap panels
-- of dashboards/apns-relay-audit.json ("Trap hits over time by app and trap",
-- "Trap hits by app and trap"; issue 28). Read from the rows, each counted
-- every trap hit of its range through apns_audit_trap_time: 6% of the rows in
-- the test's mix, 0.6-4.2 s over 7 days at a million rows a day. From these
-- tables "by app and trap" reads one row per app, trap and whole hour of the
-- range, one per whole 5 minutes outside those hours, and the rows of the
-- range's part-5-minutes at either end; "over time" the whole 5 minutes and
-- the part-5-minutes' rows (its interval is at least 5 minutes and Grafana
-- rounds it to 5m, 10m, 15m, 20m, 30m, 1h, ...: whole multiples of 5 minutes,
-- so each 5 minutes' hits fall in one bucket). The same counts, first and
-- last hits as the rows, exact to the row, whatever the range. Measured in
-- docs/performance.md ("The audit dashboard over 7 days");
-- Tests/AuditTests/AuditDashboardTests.swift holds the plans to it.
--
-- Filled like 0007's token counts: a statement trigger on apns_audit, one
-- upsert per app, trap and 5 minutes (and hour) an INSERT or COPY touched,
-- from the statement's new rows (a transition table: a replay's ON CONFLICT
-- DO NOTHING passes only the rows it inserted). Only rows that hit a trap (a
-- few in a hundred) are aggregated; a statement without any upserts nothing.
-- 5 minutes and hours on UTC (date_bin from 2000-01-01 UTC, a whole number of
-- 5 minutes after the Unix epoch, so they are Grafana's buckets).

CREATE TABLE apns_audit_trap_5min (
    bucket    timestamptz NOT NULL,
    app       text        NOT NULL,
    trap      text        NOT NULL,
    -- Rows recorded in [bucket, bucket + 5 minutes) whose trap_ids hold trap
    -- (each occurrence, as unnest(trap_ids) counts them).
    hits      bigint      NOT NULL,
    first_hit timestamptz NOT NULL,
    last_hit  timestamptz NOT NULL,
    PRIMARY KEY (bucket, app, trap)
);

-- The same per whole hour: a week's range reads 168 rows per app and trap, not 2,016.
CREATE TABLE apns_audit_trap_hours (
    hour      timestamptz NOT NULL,
    app       text        NOT NULL,
    trap      text        NOT NULL,
    hits      bigint      NOT NULL,
    first_hit timestamptz NOT NULL,
    last_hit  timestamptz NOT NULL,
    PRIMARY KEY (hour, app, trap)
);

CREATE FUNCTION apns_audit_count_trap_hits() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO apns_audit_trap_5min AS m (bucket, app, trap, hits, first_hit, last_hit)
    SELECT date_bin('5 minutes', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, trap, count(*), min(recorded_at), max(recorded_at)
    FROM apns_audit_new_rows, unnest(trap_ids) AS trap
    WHERE trap_ids <> '{}'
    GROUP BY 1, 2, 3
    -- One order for every writer: two relays' upserts never wait in a cycle.
    ORDER BY 1, 2, 3
    ON CONFLICT (bucket, app, trap) DO UPDATE
        SET hits = m.hits + excluded.hits, first_hit = least(m.first_hit, excluded.first_hit), last_hit = greatest(m.last_hit, excluded.last_hit);
    INSERT INTO apns_audit_trap_hours AS h (hour, app, trap, hits, first_hit, last_hit)
    SELECT date_bin('1 hour', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, trap, count(*), min(recorded_at), max(recorded_at)
    FROM apns_audit_new_rows, unnest(trap_ids) AS trap
    WHERE trap_ids <> '{}'
    GROUP BY 1, 2, 3
    ORDER BY 1, 2, 3
    ON CONFLICT (hour, app, trap) DO UPDATE
        SET hits = h.hits + excluded.hits, first_hit = least(h.first_hit, excluded.first_hit), last_hit = greatest(h.last_hit, excluded.last_hit);
    RETURN NULL;
END;
$$;

-- CREATE TRIGGER holds inserts until this migration commits: the backfill
-- below and the trigger see the same rows, none counted twice or missed.
CREATE TRIGGER apns_audit_count_trap_hits
    AFTER INSERT ON apns_audit REFERENCING NEW TABLE AS apns_audit_new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION apns_audit_count_trap_hits();

INSERT INTO apns_audit_trap_5min (bucket, app, trap, hits, first_hit, last_hit)
SELECT date_bin('5 minutes', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, trap, count(*), min(recorded_at), max(recorded_at)
FROM apns_audit, unnest(trap_ids) AS trap
WHERE trap_ids <> '{}'
GROUP BY 1, 2, 3;
INSERT INTO apns_audit_trap_hours (hour, app, trap, hits, first_hit, last_hit)
SELECT date_bin('1 hour', bucket, timestamptz '2000-01-01 00:00:00+00'), app, trap, sum(hits), min(first_hit), max(last_hit)
FROM apns_audit_trap_5min
GROUP BY 1, 2, 3;

-- Retention drops the counts with the partitions they came from.
CREATE OR REPLACE FUNCTION apns_audit_drop_partitions(keep_days integer) RETURNS integer
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
    DELETE FROM apns_audit_token_minutes WHERE minute < cutoff::timestamp AT TIME ZONE 'UTC';
    DELETE FROM apns_audit_token_hours WHERE hour < cutoff::timestamp AT TIME ZONE 'UTC';
    DELETE FROM apns_audit_trap_5min WHERE bucket < cutoff::timestamp AT TIME ZONE 'UTC';
    DELETE FROM apns_audit_trap_hours WHERE hour < cutoff::timestamp AT TIME ZONE 'UTC';
    RETURN dropped;
END;
$$;
