-- Who owns a period (dispatcher.go): a session advisory lock of class $1
-- on the partner and period ($2).

-- name: TryOwnPeriod
SELECT pg_try_advisory_lock($1, hashtext($2));

-- name: ReleasePeriod
SELECT pg_advisory_unlock($1, hashtext($2));

