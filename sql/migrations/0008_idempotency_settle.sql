-- An Idempotency-Key whose send was answered while Postgres was away stays
-- `in_flight` in apns_idempotency_keys: the relay could not record the answer.
-- Its audit row reaches the table from the relay's journal. Before a repeat
-- may claim such a key over (its lease ran out), the relay looks for that row
-- (caller, idempotency_key_hash, recorded_at since the claim) and answers from
-- it instead of sending again. This index makes that lookup a probe; only
-- keyed sends have an entry, so unkeyed inserts pay nothing for it.

CREATE INDEX IF NOT EXISTS apns_audit_idempotency_key
    ON apns_audit (caller, idempotency_key_hash, recorded_at)
    WHERE idempotency_key_hash IS NOT NULL;
