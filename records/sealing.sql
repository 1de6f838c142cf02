-- name: SealedWebhookSecrets
SELECT partner_id, sealed FROM webhook_secrets WHERE revoked_at IS NULL;

-- name: AnythingSealed
SELECT EXISTS (SELECT 1 FROM webhook_secrets)
	OR EXISTS (SELECT 1 FROM ssh_host_keys) OR EXISTS (SELECT 1 FROM pgp_platform_keys);
