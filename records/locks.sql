-- name: LockPeriod
INSERT INTO period_locks (partner_id, pay_period, reason, locked_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (partner_id, pay_period) DO UPDATE SET reason = EXCLUDED.reason,
	locked_by = EXCLUDED.locked_by, locked_at = now();

-- name: LockPeriodRecords
UPDATE records SET locked_reason = $3, locked_at = now()
WHERE partner_id = $1 AND pay_period = $2;

-- name: UnlockPeriod
DELETE FROM period_locks WHERE partner_id = $1 AND pay_period = $2;

-- name: UnlockPeriodRecords
UPDATE records SET locked_reason = NULL, locked_at = NULL
WHERE partner_id = $1 AND pay_period = $2 AND locked_reason IS NOT NULL;

-- name: RecordUnlock
INSERT INTO lock_events (partner_id, pay_period, action, reason, by, records)
VALUES ($1, $2, 'unlock', $3, $4, $5);

-- name: LockEvents
SELECT id, partner_id, pay_period, action, reason, by, at, records
FROM lock_events WHERE partner_id = $1 AND ($2 = '' OR pay_period = upper($2)) ORDER BY id;

