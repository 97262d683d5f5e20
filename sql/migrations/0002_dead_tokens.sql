-- Tokens APNs called dead (Unregistered, ExpiredToken) or wrong (BadDeviceToken,
-- DeviceTokenNotForTopic). Backends read it (GET /v1/dead-tokens) to prune their
-- token stores; the relay upserts a row each time APNs says it again.

CREATE TABLE apns_dead_tokens (
    app               text        NOT NULL,
    environment       text        NOT NULL,
    token             text        NOT NULL,
    token_fingerprint text        NOT NULL,
    reason            text        NOT NULL,
    -- When APNs learned the token was gone (410 "timestamp"), if it said.
    apns_timestamp    timestamptz,
    first_seen        timestamptz NOT NULL,
    last_seen         timestamptz NOT NULL,
    PRIMARY KEY (app, environment, token)
);

CREATE INDEX apns_dead_tokens_recent ON apns_dead_tokens (app, last_seen DESC);
CREATE INDEX apns_dead_tokens_fingerprint ON apns_dead_tokens (token_fingerprint);
