-- name: LeaseIdempotencyKey
-- A new key is leased. A key under a lease that ran out (its holder
-- crashed), or whose submission is processed (whoever gives the answer, it
-- is the envelope's), is taken over; one under another's live lease is
-- left alone: no row.
INSERT INTO idempotency_keys AS k (partner_id, idem_key, lease_owner, lease_until)
VALUES ($1, $2, $3, now() + $4::interval)
ON CONFLICT (partner_id, idem_key) DO UPDATE
SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until, created_at = now()
WHERE k.lease_until < now() OR EXISTS (SELECT 1 FROM submissions s JOIN envelopes e ON e.id = s.envelope_id
	WHERE s.partner_id = $1 AND s.submission_key = $2 AND e.status <> 'received')
RETURNING k.xmax <> 0;

-- name: RenewIdempotencyLease
UPDATE idempotency_keys SET lease_until = now() + $4::interval
WHERE partner_id = $1 AND idem_key = $2 AND lease_owner = $3;

-- name: ReleaseIdempotencyKey
DELETE FROM idempotency_keys WHERE partner_id = $1 AND idem_key = $2 AND lease_owner = $3;

-- name: ReapIdempotencyKeys
DELETE FROM idempotency_keys WHERE (partner_id, idem_key) IN (
	SELECT partner_id, idem_key FROM idempotency_keys
	WHERE created_at < now() - $1::interval AND lease_until < now()
	ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED);
