-- +goose Up

-- API tokens for the HTTP submission API. Only the SHA-256 of a token is kept:
-- tokens are 32 random bytes, so a fast hash is enough (nothing to brute-force).
-- prefix is the token's first characters, shown to operators to tell tokens apart.
CREATE TABLE api_tokens (
    id         bigserial PRIMARY KEY,
    partner_id text NOT NULL REFERENCES partners (id),
    token_hash bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    prefix     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_tokens_partner ON api_tokens (partner_id) WHERE revoked_at IS NULL;

-- Idempotency-Key claims of the HTTP API (IETF httpapi Idempotency-Key draft),
-- per partner, key case-folded. Kept apart from submissions: a key is claimed
-- (in_progress, with a lease so a crashed request does not block it forever)
-- before its body is read, and holds the response to replay once done.
-- Rows older than the retention (72 hours by default) are reaped in batches;
-- the submission itself stays in submissions for good.
CREATE TABLE idempotency_keys (
    partner_id       text NOT NULL REFERENCES partners (id),
    idem_key         text NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 255),
    status           text NOT NULL CHECK (status IN ('in_progress', 'done')),
    fingerprint      bytea CHECK (length(fingerprint) = 32), -- SHA-256 of the request body, once read
    lease_owner      bytea,
    lease_until      timestamptz,
    response_status  integer,
    response_type    text,
    response_body    bytea,
    envelope_id      bigint REFERENCES envelopes (id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    PRIMARY KEY (partner_id, idem_key),
    CHECK (status <> 'in_progress' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK (status <> 'done' OR (fingerprint IS NOT NULL AND response_status IS NOT NULL AND response_body IS NOT NULL))
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Webhook signing secrets (Standard Webhooks). The secret itself must be kept:
-- verifying an HMAC needs the key. Several may be active at once for rotation.
CREATE TABLE webhook_secrets (
    id         bigserial PRIMARY KEY,
    partner_id text NOT NULL REFERENCES partners (id),
    secret     bytea NOT NULL CHECK (length(secret) >= 24),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX webhook_secrets_partner ON webhook_secrets (partner_id) WHERE revoked_at IS NULL;

-- Every signed webhook delivery, claimed once by its webhook-id (the primary
-- key decides concurrent duplicates), with its raw body for audit and the
-- answer given, replayed verbatim to a redelivery.
CREATE TABLE webhook_deliveries (
    partner_id      text NOT NULL REFERENCES partners (id),
    webhook_id      text NOT NULL CHECK (length(webhook_id) BETWEEN 1 AND 255),
    body_sha256     bytea NOT NULL CHECK (length(body_sha256) = 32),
    body            bytea NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    entity_id       text,
    version         bigint,
    outcome         text,
    code            text,
    record_id       bigint REFERENCES records (id),
    record_version  integer,
    -- Filled in the same transaction as the claim: never seen empty.
    response_status integer,
    response_type   text,
    response_body   bytea,
    PRIMARY KEY (partner_id, webhook_id)
);
CREATE INDEX webhook_deliveries_record ON webhook_deliveries (record_id);

-- The highest version accepted (applied, unchanged or held) per webhook entity:
-- a delivery with a version not above it is stale.
CREATE TABLE webhook_entities (
    partner_id   text NOT NULL REFERENCES partners (id),
    entity_id    text NOT NULL,
    version      bigint NOT NULL,
    record_id    bigint REFERENCES records (id),
    webhook_id   text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partner_id, entity_id)
);

-- Webhook bodies refused as invalid (422), kept for audit: nothing was applied.
CREATE TABLE webhook_quarantine (
    id          bigserial PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (id),
    webhook_id  text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    body        bytea NOT NULL,
    code        text NOT NULL,
    field       text NOT NULL DEFAULT '',
    message     text NOT NULL
);
CREATE INDEX webhook_quarantine_partner ON webhook_quarantine (partner_id, id);

-- +goose Down
DROP TABLE webhook_quarantine, webhook_entities, webhook_deliveries, webhook_secrets, idempotency_keys, api_tokens;
