-- name: LoginLockedUntil
SELECT max(locked_until) FROM login_failures
WHERE ((scope = 'account' AND key = $1) OR (scope = 'address' AND key = $2)) AND locked_until > now();

-- name: RecordLoginFailure
WITH up AS (
	INSERT INTO login_failures AS f (scope, key, failures, last_failed_at)
	VALUES ('account', $1, 1, now()), ('address', $2, 1, now())
	ON CONFLICT (scope, key) DO UPDATE SET
		failures = CASE WHEN f.last_failed_at < now() - $3::interval THEN 1 ELSE f.failures + 1 END,
		last_failed_at = now(),
		locked_until = CASE
			WHEN f.last_failed_at < now() - $3::interval OR f.failures + 1 <= $4 THEN NULL
			ELSE now() + least($5::interval * power(2, least(f.failures - $4, 30)), $6::interval) END
	RETURNING f.locked_until
)
SELECT max(locked_until) FROM up;

-- name: ClearLoginFailures
DELETE FROM login_failures
WHERE (scope = 'account' AND key = $1) OR (scope = 'address' AND key = $2);

-- name: UnlockLogin
DELETE FROM login_failures WHERE scope = $1 AND key = $2;

