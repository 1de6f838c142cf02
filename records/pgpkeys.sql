-- name: AddPlatformPGPKey
INSERT INTO pgp_platform_keys (fingerprint, algorithm, public_key, sealed, created_at)
VALUES ($1, $2, $3, $4, $5);

-- name: PlatformPGPKeys
SELECT fingerprint, algorithm, public_key, created_at, retired_at FROM pgp_platform_keys
ORDER BY retired_at IS NOT NULL, id DESC;

-- name: ActivePlatformPGPSecrets
SELECT fingerprint, sealed FROM pgp_platform_keys WHERE retired_at IS NULL
ORDER BY id DESC;

-- name: RetirePlatformPGPKey
UPDATE pgp_platform_keys SET retired_at = now() WHERE fingerprint = $1 AND retired_at IS NULL;

-- name: ReplacePartnerPGPKeys
UPDATE partner_pgp_keys SET replaced_at = now()
WHERE partner_id = $1 AND replaced_at IS NULL AND NOT (fingerprint = ANY($2));

-- name: AddPartnerPGPKey
INSERT INTO partner_pgp_keys (partner_id, fingerprint, user_id, public_key)
VALUES ($1, $2, $3, $4)
ON CONFLICT (partner_id, fingerprint) WHERE replaced_at IS NULL DO UPDATE SET public_key = EXCLUDED.public_key, user_id = EXCLUDED.user_id;

-- name: PartnerPGPKeys
SELECT fingerprint, user_id, public_key, added_at, replaced_at FROM partner_pgp_keys
WHERE partner_id = $1 AND ($2 OR replaced_at IS NULL)
ORDER BY replaced_at IS NOT NULL, id DESC;

-- name: PlatformPGPKeysToReseal
SELECT id, fingerprint, sealed FROM pgp_platform_keys
WHERE substring(sealed FROM 2 FOR 8) <> $1 ORDER BY id FOR UPDATE;

-- name: ResealPlatformPGPKey
UPDATE pgp_platform_keys SET sealed = $2 WHERE id = $1;
