-- name: ClaimIdempotencyKey
INSERT INTO idempotency_keys (partner_id, idem_key, status, lease_owner, lease_until)
VALUES ($1, $2, 'in_progress', $3, now() + $4::interval)
ON CONFLICT DO NOTHING RETURNING true;

-- name: TakeOverIdempotencyKey
UPDATE idempotency_keys SET lease_owner = $3, lease_until = now() + $4::interval
WHERE partner_id = $1 AND idem_key = $2 AND status = 'in_progress' AND (lease_until < now()
	OR EXISTS (SELECT 1 FROM submissions s JOIN envelopes e ON e.id = s.envelope_id
		WHERE s.partner_id = $1 AND s.submission_key = $2 AND e.status <> 'received'))
RETURNING true;

-- name: ReadIdempotencyKey
SELECT status, fingerprint, response_status, response_type, response_body, envelope_id
FROM idempotency_keys WHERE partner_id = $1 AND idem_key = $2;

-- name: RenewIdempotencyLease
UPDATE idempotency_keys SET lease_until = now() + $4::interval
WHERE partner_id = $1 AND idem_key = $2 AND status = 'in_progress' AND lease_owner = $3;

-- name: CompleteIdempotencyKey
UPDATE idempotency_keys SET status = 'done', fingerprint = $4, response_status = $5, response_type = $6,
	response_body = $7, envelope_id = $8, completed_at = now(), lease_owner = NULL, lease_until = NULL
WHERE partner_id = $1 AND idem_key = $2 AND status = 'in_progress' AND lease_owner = $3;

-- name: ReleaseIdempotencyKey
DELETE FROM idempotency_keys
WHERE partner_id = $1 AND idem_key = $2 AND status = 'in_progress' AND lease_owner = $3;

-- name: ReapIdempotencyKeys
DELETE FROM idempotency_keys WHERE (partner_id, idem_key) IN (
	SELECT partner_id, idem_key FROM idempotency_keys
	WHERE created_at < now() - $1::interval AND (status = 'done' OR lease_until < now())
	ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED);

