-- +goose Up

-- When a partner's API token was last accepted, to the minute (the request
-- path writes it at most once a minute per token), so operators can tell
-- which tokens are still in use before revoking one.
ALTER TABLE api_tokens ADD COLUMN last_used_at timestamptz;

-- +goose Down
ALTER TABLE api_tokens DROP COLUMN last_used_at;
