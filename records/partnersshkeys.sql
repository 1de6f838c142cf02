-- name: RevokePartnerKey
UPDATE partner_keys SET revoked_at = now()
WHERE partner_id = $1 AND fingerprint = $2 AND revoked_at IS NULL;

-- name: KeyAllowed
SELECT EXISTS (SELECT 1 FROM partner_keys
WHERE partner_id = $1 AND fingerprint = $2 AND revoked_at IS NULL);

-- name: AddPartnerKey
INSERT INTO partner_keys (partner_id, fingerprint, public_key, comment)
VALUES ($1, $2, $3, $4)
ON CONFLICT (partner_id, fingerprint) DO UPDATE SET revoked_at = NULL;

