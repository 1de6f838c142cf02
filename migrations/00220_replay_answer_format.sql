-- +goose Up

-- A replay's stored answer is a records.StoredAnswer, as an idempotency
-- key's and a webhook's: a code, a format and the bytes, opaque to the
-- store. Replays kept only the code and the bytes; every one answered
-- before this migration was JSON, so that is their format. New rows give
-- theirs (no default: the store does not choose a door's format).
ALTER TABLE replays ADD COLUMN response_type text NOT NULL DEFAULT 'application/json';
ALTER TABLE replays ALTER COLUMN response_type DROP DEFAULT;

-- +goose Down
ALTER TABLE replays DROP COLUMN response_type;
