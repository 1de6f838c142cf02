-- +goose Up

-- Webhook secrets are kept sealed (AES-256-GCM, records/sealing.go) under
-- a key outside the database. Secrets written before are sealed by every
-- payintake command at start (records.SealWebhookSecrets), after which
-- `secret` is NULL everywhere; a row holds one form or the other.
ALTER TABLE webhook_secrets
    ADD COLUMN sealed bytea CHECK (length(sealed) > 21),
    ALTER COLUMN secret DROP NOT NULL,
    ADD CONSTRAINT webhook_secrets_one_form CHECK ((secret IS NULL) <> (sealed IS NULL));

-- +goose Down
-- Sealed secrets cannot be opened in SQL: going down loses them (issue new
-- ones with `payintake partner webhook-secret`).
DELETE FROM webhook_secrets WHERE secret IS NULL;
ALTER TABLE webhook_secrets
    DROP CONSTRAINT webhook_secrets_one_form,
    DROP COLUMN sealed,
    ALTER COLUMN secret SET NOT NULL;
