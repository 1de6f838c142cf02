-- What `dispatch status` shows of a run (status.go).

-- name: CountDueLines
SELECT state, count(*) FROM dispatch_due WHERE run_id = $1 GROUP BY state;

-- name: DeadLetters
SELECT d.key, d.employee_ref, d.component, d.version, d.state,
	coalesce(l.last_status, 0), coalesce(l.last_detail, ''), c.stored_hash, c.request_hash
FROM dispatch_due d
LEFT JOIN dispatch_ledger l ON l.key = d.key
LEFT JOIN LATERAL (SELECT stored_hash, request_hash FROM dispatch_conflicts c
	WHERE c.key = d.key AND c.run_id = d.run_id ORDER BY id DESC LIMIT 1) c ON true
WHERE d.run_id = $1 AND d.state IN ('failed', 'conflict') ORDER BY d.id;
