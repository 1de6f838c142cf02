-- name: WebhookSecretsToSeal
SELECT id, partner_id, secret, sealed FROM webhook_secrets
WHERE secret IS NOT NULL OR ($1 AND substring(sealed FROM 2 FOR 8) <> $2) ORDER BY id FOR UPDATE;

-- name: SealWebhookSecret
UPDATE webhook_secrets SET secret = NULL, sealed = $2 WHERE id = $1;

-- name: SealedWebhookSecrets
SELECT partner_id, sealed FROM webhook_secrets WHERE revoked_at IS NULL AND sealed IS NOT NULL;


-- name: AnyPlaintextWebhookSecret
SELECT EXISTS (SELECT 1 FROM webhook_secrets WHERE secret IS NOT NULL);

-- name: AnythingSealed
SELECT EXISTS (SELECT 1 FROM webhook_secrets WHERE sealed IS NOT NULL)
	OR EXISTS (SELECT 1 FROM ssh_host_keys) OR EXISTS (SELECT 1 FROM pgp_platform_keys);
