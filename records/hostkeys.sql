-- name: AddHostKey
-- A key of its type already in that state, or the key itself stored
-- already: nothing is added (the caller reads back what is there).
INSERT INTO ssh_host_keys (key_type, state, fingerprint, public_key, sealed, origin, activated_at)
VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $2 = 'active' THEN now() END)
ON CONFLICT DO NOTHING;

-- name: HostKeys
SELECT id, key_type, state, fingerprint, public_key, sealed, origin, created_at, activated_at, retired_at
FROM ssh_host_keys ORDER BY id;

-- name: LockHostKeys
-- Promotions and activations of one type do not interleave; readers are not held.
LOCK TABLE ssh_host_keys IN SHARE ROW EXCLUSIVE MODE;

-- name: RetireActiveHostKeysWithNext
UPDATE ssh_host_keys SET state = 'retired', retired_at = now()
WHERE state = 'active' AND key_type IN (SELECT key_type FROM ssh_host_keys WHERE state = 'next');

-- name: ActivateNextHostKeys
UPDATE ssh_host_keys SET state = 'active', activated_at = now() WHERE state = 'next' RETURNING fingerprint;

-- name: RetireActiveHostKey
UPDATE ssh_host_keys SET state = 'retired', retired_at = now()
WHERE key_type = $1 AND state = 'active' AND fingerprint <> $2;

-- name: ActivateHostKey
INSERT INTO ssh_host_keys (key_type, state, fingerprint, public_key, sealed, origin, activated_at)
VALUES ($1, 'active', $2, $3, $4, $5, now())
ON CONFLICT (fingerprint) DO UPDATE SET state = 'active', activated_at = now(), retired_at = NULL
WHERE ssh_host_keys.state <> 'active';

-- name: SealedHostKeys
SELECT id, fingerprint, sealed FROM ssh_host_keys WHERE substring(sealed FROM 2 FOR 8) <> $1 ORDER BY id FOR UPDATE;

-- name: ResealHostKey
UPDATE ssh_host_keys SET sealed = $2 WHERE id = $1;
