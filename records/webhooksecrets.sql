-- name: AddWebhookSecret
INSERT INTO webhook_secrets (partner_id, sealed) VALUES ($1, $2);

-- name: WebhookSecrets
SELECT sealed FROM webhook_secrets
WHERE partner_id = $1 AND revoked_at IS NULL AND sealed IS NOT NULL ORDER BY id DESC;

-- name: RevokeOldWebhookSecrets
UPDATE webhook_secrets SET revoked_at = now()
WHERE partner_id = $1 AND revoked_at IS NULL
	AND id <> (SELECT max(id) FROM webhook_secrets WHERE partner_id = $1 AND revoked_at IS NULL);

