-- The runs, their due lines and the ledger (ledger.go).

-- name: OpenRun
SELECT dispatch_open_run($1, $2);

-- name: Runs
SELECT {{run_columns}} FROM dispatch_runs
WHERE ($1 = '' OR partner_id = $1) AND ($2 = '' OR pay_period = $2) AND (NOT $3 OR state = 'in_progress')
ORDER BY partner_id, pay_period, run;

-- name: Run
SELECT {{run_columns}} FROM dispatch_runs WHERE id = $1;

-- name: PendingLines
SELECT id, record_id, version, round, employee_id, employee_ref, component,
	amount, currency, hours, rate, pay_date
FROM dispatch_due WHERE run_id = $1 AND state = 'pending' AND (round, id) > ($3, $4)
ORDER BY round, id LIMIT $2;

-- name: InsertConflicts
INSERT INTO dispatch_conflicts (key, run_id, stored_hash, request_hash)
SELECT u.key, $1, u.stored, u.want FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS u(key, stored, want)
ON CONFLICT DO NOTHING;

-- name: MarkConflicts
UPDATE dispatch_due d SET state = 'conflict', key = u.key
FROM unnest($1::bigint[], $2::text[]) AS u(id, key) WHERE d.id = u.id;

-- name: SettleDueLines
UPDATE dispatch_due d SET state = u.state, key = u.key
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(id, key, state) WHERE d.id = u.id;

-- name: CountSettled
UPDATE dispatch_runs SET settled = settled + $2, updated_at = now() WHERE id = $1;

-- name: AnyArchived
SELECT EXISTS (SELECT 1 FROM dispatch_ledger_archive WHERE key = ANY($1));

-- name: LedgerAndArchive
SELECT key, request_hash, line, state, attempts, false FROM dispatch_ledger WHERE key = ANY($1)
UNION ALL
SELECT key, request_hash, line, state, attempts, true FROM dispatch_ledger_archive WHERE key = ANY($1);

-- name: CopyBackArchived
INSERT INTO dispatch_ledger (key, request_hash, partner_id, pay_period, employee_id,
	employee_ref, component, version, record_id, line, state, attempts, last_status, last_detail,
	created_at, updated_at, settled_at)
SELECT key, request_hash, partner_id, pay_period, employee_id, employee_ref, component, version, record_id,
	line, state, attempts, last_status, last_detail, created_at, updated_at, settled_at
FROM dispatch_ledger_archive WHERE key = ANY($1)
ON CONFLICT (key) DO NOTHING;

-- The settings of every dispatch transaction (see txSettings): SET LOCAL,
-- as one statement that can be prepared.
-- name: TxSettings
SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_custom_plan', true),
	set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true);

-- name: AnalyzeDue
ANALYZE dispatch_due (run_id, state, round);

-- name: RecordLedgerAnswers
UPDATE dispatch_ledger l SET state = u.state, attempts = l.attempts + 1,
	last_status = nullif(u.status, 0), last_detail = u.detail, updated_at = now(),
	settled_at = CASE WHEN u.state <> 'pending' THEN now() END
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS u(key, state, status, detail)
WHERE l.key = u.key AND l.state = 'pending'
RETURNING l.key;

-- name: LedgerStates
SELECT key, state FROM dispatch_ledger WHERE key = ANY($1);

-- name: RecordDueAnswers
UPDATE dispatch_due d SET key = u.key, state = u.state, round = d.round + u.bump
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::int[]) AS u(id, key, state, bump)
WHERE d.id = u.id AND d.run_id = $1 AND d.state = 'pending'
RETURNING d.state;

-- name: RecordRunAnswers
UPDATE dispatch_runs SET settled = settled + $2, requests = requests + $4,
	cursor = greatest(cursor, $3), updated_at = now() WHERE id = $1;

-- name: FinishRun
UPDATE dispatch_runs r SET state = 'complete', completed_at = now(), updated_at = now(),
	settled = (SELECT count(*) FROM dispatch_due WHERE run_id = r.id AND state <> 'pending')
WHERE id = $1 AND state = 'in_progress'
  AND NOT EXISTS (SELECT 1 FROM dispatch_due WHERE run_id = r.id AND state = 'pending');

-- name: RetryLedger
UPDATE dispatch_ledger l SET state = 'pending', attempts = 0, settled_at = NULL, updated_at = now()
FROM dispatch_due d JOIN dispatch_runs r ON r.id = d.run_id
WHERE r.partner_id = $1 AND r.pay_period = $2 AND d.state = 'failed' AND l.key = d.key AND l.state = 'failed';

-- name: RetryDueLines
UPDATE dispatch_due d SET state = 'pending', round = d.round + 1
FROM dispatch_runs r WHERE r.id = d.run_id AND r.partner_id = $1 AND r.pay_period = $2 AND d.state = 'failed';

-- name: ReopenRuns
UPDATE dispatch_runs r SET state = 'in_progress', completed_at = NULL, updated_at = now(),
	settled = (SELECT count(*) FROM dispatch_due WHERE run_id = r.id AND state <> 'pending')
WHERE r.partner_id = $1 AND r.pay_period = $2
  AND EXISTS (SELECT 1 FROM dispatch_due WHERE run_id = r.id AND state = 'pending');

-- name: ArchiveLedger
WITH moved AS (
	DELETE FROM dispatch_ledger WHERE state <> 'pending' AND settled_at < $1
	RETURNING key, request_hash, partner_id, pay_period, employee_id, employee_ref, component, version,
		record_id, line, state, attempts, last_status, last_detail, created_at, updated_at, settled_at)
INSERT INTO dispatch_ledger_archive (key, request_hash, partner_id, pay_period, employee_id, employee_ref,
	component, version, record_id, line, state, attempts, last_status, last_detail, created_at, updated_at,
	settled_at, archived_at)
SELECT *, $2 FROM moved
ON CONFLICT (key) DO UPDATE SET state = EXCLUDED.state, attempts = EXCLUDED.attempts,
	last_status = EXCLUDED.last_status, last_detail = EXCLUDED.last_detail, updated_at = EXCLUDED.updated_at,
	settled_at = EXCLUDED.settled_at, archived_at = EXCLUDED.archived_at;
