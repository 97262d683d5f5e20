-- The stale-token ratio (dashboards/apns-relay-audit.json, "Stale-token ratio
-- by app") from per-minute counts (issue 28). The panel counts every device
-- send in its range: read from the rows, that is every row of the range
-- (100-300 ms over one to three days at 100,000 rows a day, parallel scans of
-- whole partitions; seconds over a week at a million a day). From this table
-- it is one row per app and whole hour of the range (168 per app over 7
-- days), one per app and whole minute outside those hours (at most 118), and
-- the rows of the range's first and last part-minutes, through
-- apns_audit_time: the same counts, exact to the row, whatever the range. Measured in docs/performance.md ("The audit dashboard over
-- 7 days"); Tests/AuditTests/AuditDashboardTests.swift holds the plan to it.
--
-- Filled by a statement trigger on apns_audit: one upsert per app and minute
-- (and hour) an INSERT or COPY touched, aggregated from the statement's new rows (a
-- transition table; a replay's INSERT ... ON CONFLICT DO NOTHING passes only
-- the rows it inserted, so a row replayed twice counts once). Nothing a relay
-- writes or reads changes: an older relay (a rollback) feeds it the same way.
-- Two relays writing the same app's current minute wait for each other's
-- commit on that one counter row (their batches are milliseconds apart).
-- Minutes on UTC (date_bin), whatever the session's time zone.

CREATE TABLE apns_audit_token_minutes (
    minute timestamptz NOT NULL,
    app    text        NOT NULL,
    -- Device sends (token_fingerprint set) recorded in [minute, minute + 1 minute).
    sends  bigint      NOT NULL,
    -- Of them, those APNs called dead (Unregistered, ExpiredToken: trap MS020).
    dead   bigint      NOT NULL,
    PRIMARY KEY (minute, app)
);

-- The same counts per whole hour: a week's range reads 168 rows per app, not 10,080.
CREATE TABLE apns_audit_token_hours (
    hour   timestamptz NOT NULL,
    app    text        NOT NULL,
    sends  bigint      NOT NULL,
    dead   bigint      NOT NULL,
    PRIMARY KEY (hour, app)
);
CREATE FUNCTION apns_audit_count_token_minutes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO apns_audit_token_minutes AS m (minute, app, sends, dead)
    SELECT date_bin('1 minute', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, count(*),
           count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken'))
    FROM apns_audit_new_rows
    WHERE token_fingerprint IS NOT NULL
    GROUP BY 1, 2
    -- One order for every writer: two relays' upserts never wait in a cycle.
    ORDER BY 1, 2
    ON CONFLICT (minute, app) DO UPDATE SET sends = m.sends + excluded.sends, dead = m.dead + excluded.dead;
    INSERT INTO apns_audit_token_hours AS h (hour, app, sends, dead)
    SELECT date_bin('1 hour', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, count(*),
           count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken'))
    FROM apns_audit_new_rows
    WHERE token_fingerprint IS NOT NULL
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (hour, app) DO UPDATE SET sends = h.sends + excluded.sends, dead = h.dead + excluded.dead;
    RETURN NULL;
END;
$$;

-- CREATE TRIGGER holds inserts until this migration commits: the backfill
-- below and the trigger see the same rows, none counted twice or missed.
CREATE TRIGGER apns_audit_count_token_minutes
    AFTER INSERT ON apns_audit REFERENCING NEW TABLE AS apns_audit_new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION apns_audit_count_token_minutes();

INSERT INTO apns_audit_token_minutes (minute, app, sends, dead)
SELECT date_bin('1 minute', recorded_at, timestamptz '2000-01-01 00:00:00+00'), app, count(*),
       count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken'))
FROM apns_audit
WHERE token_fingerprint IS NOT NULL
GROUP BY 1, 2;
INSERT INTO apns_audit_token_hours (hour, app, sends, dead)
SELECT date_bin('1 hour', minute, timestamptz '2000-01-01 00:00:00+00'), app, sum(sends), sum(dead)
FROM apns_audit_token_minutes
GROUP BY 1, 2;

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
    RETURN dropped;
END;
$$;
