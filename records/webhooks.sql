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

-- name: ClassifyWebhookChange
SELECT c.outcome, coalesce(c.code, ''), coalesce(c.message, ''), r.id, coalesce(x.id, 0),
	CASE WHEN c.outcome <> 'rejected' THEN coalesce(em.employee_id, derived_employee_id($1, c.employee_ref)) ELSE '' END
FROM classified c
LEFT JOIN employees em ON em.partner_id = $1 AND em.employee_ref = c.employee_ref
LEFT JOIN records r ON r.partner_id = $1 AND r.employee_ref = c.employee_ref
	AND r.pay_period = c.pay_period AND r.component = c.component
LEFT JOIN exceptions x ON x.status = 'open' AND x.partner_id = $1 AND x.employee_ref = c.employee_ref
	AND x.pay_period = c.pay_period AND x.component = c.component;

-- name: StoreWebhookEntityVersion
INSERT INTO webhook_entities (partner_id, entity_id, version, record_id, webhook_id) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (partner_id, entity_id) DO UPDATE SET version = EXCLUDED.version, record_id = EXCLUDED.record_id,
	webhook_id = EXCLUDED.webhook_id, updated_at = now();

