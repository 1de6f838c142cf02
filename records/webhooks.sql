-- name: ClaimWebhookDelivery
INSERT INTO webhook_deliveries (partner_id, webhook_id, body_sha256, body, entity_id, version)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING true;

-- name: WebhookDeliveryAnswer
SELECT body_sha256, response_status, response_type, response_body
FROM webhook_deliveries WHERE partner_id = $1 AND webhook_id = $2;

-- name: CompleteWebhookDelivery
UPDATE webhook_deliveries SET outcome = $3, code = $4, record_id = $5,
	record_version = (SELECT version FROM records WHERE id = $5),
	response_status = $6, response_type = $7, response_body = $8
WHERE partner_id = $1 AND webhook_id = $2;

-- name: QuarantineWebhook
INSERT INTO webhook_quarantine (partner_id, webhook_id, body, code, field, message)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: QuarantinedWebhooks
SELECT id, partner_id, webhook_id, body, code, field, message
FROM webhook_quarantine WHERE partner_id = $1 ORDER BY id;

-- name: WebhookEntityVersion
SELECT version FROM webhook_entities WHERE partner_id = $1 AND entity_id = $2;

-- name: StoreWebhookEntityVersion
INSERT INTO webhook_entities (partner_id, entity_id, version, record_id, webhook_id) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (partner_id, entity_id) DO UPDATE SET version = EXCLUDED.version, record_id = EXCLUDED.record_id,
	webhook_id = EXCLUDED.webhook_id, updated_at = now();

