-- name: StoreOneChunkResult
-- A result file of one chunk: a whole file's rejection, a replay file's
-- result.
INSERT INTO envelope_results (envelope_id, n, data) VALUES ($1, 0, $2);

-- name: CloseRejectedEnvelope
UPDATE envelopes SET status = $2, counts = $3, result_size = $4, seq = $5, processed_at = clock_timestamp() WHERE id = $1;

-- name: RecordFailure
INSERT INTO envelope_attempts (envelope_id, failures, last_error, last_failed_at)
VALUES ($1, 1, $2, now())
ON CONFLICT (envelope_id) DO UPDATE SET failures = envelope_attempts.failures + 1,
	last_error = excluded.last_error, last_failed_at = now();


-- name: LockEnvelopeForProcessing
SELECT {{envelope_columns}} FROM envelopes WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED;

-- name: CloseEnvelope
UPDATE envelopes SET status = 'processed', counts = $2, seq = $3, processed_at = now(),
	result_size = (SELECT sum(length(data)) FROM envelope_results WHERE envelope_id = $1)
WHERE id = $1 RETURNING result_size;
