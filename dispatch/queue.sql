-- The sweep's question (queue.go): the periods with a run in progress.

-- name: PeriodsInProgress
SELECT DISTINCT partner_id, pay_period FROM dispatch_runs WHERE state = 'in_progress';
