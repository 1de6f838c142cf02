-- name: IssueAPIToken
INSERT INTO api_tokens (partner_id, token_hash, prefix) VALUES ($1, $2, $3);

-- name: TokenPartner
WITH t AS (
	SELECT id, partner_id, last_used_at FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL
), used AS (
	UPDATE api_tokens a SET last_used_at = now() FROM t
	WHERE a.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute')
)
SELECT partner_id FROM t;

-- name: APITokens
SELECT prefix, created_at, last_used_at, revoked_at FROM api_tokens
WHERE partner_id = $1 ORDER BY id;

-- name: APITokenForRevoke
SELECT id FROM api_tokens WHERE partner_id = $1 AND prefix = $2 AND revoked_at IS NULL FOR UPDATE;

-- name: RevokeAPIToken
UPDATE api_tokens SET revoked_at = now() WHERE id = $1;

-- name: RevokeOldAPITokens
UPDATE api_tokens SET revoked_at = now()
WHERE partner_id = $1 AND revoked_at IS NULL
	AND id <> (SELECT max(id) FROM api_tokens WHERE partner_id = $1 AND revoked_at IS NULL);

