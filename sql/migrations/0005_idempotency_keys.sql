-- Idempotent sends (docs/api.md, "Idempotency keys"): one row per (caller,
-- key) a backend sent with an Idempotency-Key, shared by every relay on this
-- database so a retry that lands on another instance, or after a restart,
-- finds the first send's answer instead of sending again.
--
-- A relay claims a key with one INSERT ... ON CONFLICT: of two relays racing
-- on one key exactly one inserts (state in_flight) and sends; the other sees
-- the row. A row past expires_at, or an in_flight row past lease_until (its
-- relay stopped before recording the answer), is claimed over in the same
-- statement. Rows past expires_at are deleted in bounded batches.

CREATE TABLE apns_idempotency_keys (
    -- The API key's name: a key from another caller is another key.
    caller          text        NOT NULL,
    -- SHA-256 hex of caller, a newline and the key: the key itself may carry data.
    key_hash        text        NOT NULL,
    -- SHA-256 hex of the canonical request (route, app, environment, token or
    -- channel, payload, headers): a repeat with another body is refused.
    request_hash    text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('in_flight', 'done')),
    -- The relay instance sending it, while in flight.
    owner           text        NOT NULL,
    lease_until     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    -- The first send's result, once done.
    apns_id         text,
    status          integer,
    reason          text,
    attempts        integer,
    -- The answer as the caller got it: HTTP status, headers (JSON object), body.
    answer_status   integer,
    answer_headers  text,
    answer_body     text,
    PRIMARY KEY (caller, key_hash)
);

CREATE INDEX apns_idempotency_keys_expiry ON apns_idempotency_keys (expires_at);

-- The audit row of a keyed send carries the same hash; NULL for sends without a key.
ALTER TABLE apns_audit ADD COLUMN idempotency_key_hash text;
