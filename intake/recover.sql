-- Envelopes left by a stopped process (recover.go; see "Orphaned
-- envelopes" there).

-- The transaction's clock, as now() in Orphans.
-- name: Now
SELECT now();

-- Envelopes still received after $1 that nobody holds, requeued fewer than
-- $2 times and not within their back-off, and without a job waiting ($3,
-- from coverOf: the envelopes River covers are left out here).
-- name: Orphans
SELECT e.id, e.partner_id, coalesce(a.requeues, 0) FROM envelopes e
LEFT JOIN envelope_attempts a ON a.envelope_id = e.id
WHERE e.status = 'received' AND e.received_at < now() - $1::interval
  AND coalesce(a.requeues, 0) < $2
  AND (a.last_requeued_at IS NULL OR a.last_requeued_at < now() - $1::interval * power(2, a.requeues))
  AND e.id <> ALL($3::bigint[])
ORDER BY e.id
LIMIT 100
FOR NO KEY UPDATE OF e SKIP LOCKED;

-- name: CountRequeue
INSERT INTO envelope_attempts (envelope_id, requeues, last_requeued_at)
VALUES ($1, 1, now()) ON CONFLICT (envelope_id) DO UPDATE
SET requeues = envelope_attempts.requeues + 1, last_requeued_at = now();

-- The envelopes left for an operator: requeued $1 (MaxRequeues) times, or
-- whose job was discarded or cancelled with none waiting ($2, from
-- coverOf). metrics.go counts them in payintake_envelopes_stuck.
-- name: CountStuck
SELECT count(*) FROM envelopes e
WHERE e.status = 'received' AND (
	EXISTS (SELECT 1 FROM envelope_attempts a WHERE a.envelope_id = e.id AND a.requeues >= $1)
	OR e.id = ANY($2::bigint[]));
