-- name: AddWebhookSecret
INSERT INTO webhook_secrets (partner_id, sealed) VALUES ($1, $2);

-- name: WebhookSecrets
SELECT sealed FROM webhook_secrets
WHERE partner_id = $1 AND revoked_at IS NULL ORDER BY id DESC;

-- name: RevokeOldWebhookSecrets
UPDATE webhook_secrets SET revoked_at = now()
WHERE partner_id = $1 AND revoked_at IS NULL
	AND id <> (SELECT max(id) FROM webhook_secrets WHERE partner_id = $1 AND revoked_at IS NULL);

-- name: WebhookSecretsToReseal
SELECT id, partner_id, sealed FROM webhook_secrets
WHERE substring(sealed FROM 2 FOR 8) <> $1 ORDER BY id FOR UPDATE;

-- name: ResealWebhookSecret
UPDATE webhook_secrets SET sealed = $2 WHERE id = $1;
