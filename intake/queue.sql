-- The job queue's questions of the envelopes (queue.go, metrics_queue.go).

-- How many (up to 16) of the partner's files received before this one are
-- still waiting: how long a busy partner's job is put back.
-- name: FilesAhead
SELECT count(*) FROM (SELECT 1 FROM envelopes
	WHERE status = 'received' AND partner_id = $1 AND id < $2 LIMIT 16) a;

-- The envelopes waiting and the age of the oldest, for /metrics.
-- name: Waiting
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(received_at)), 0)::float8
FROM envelopes WHERE status = 'received';
