-- name: StoreFileRejectResult
INSERT INTO envelope_results (envelope_id, n, data) VALUES ($1, 0, $2);

-- name: CloseRejectedEnvelope
UPDATE envelopes SET status = $2, counts = $3, result_size = $4, seq = $5, processed_at = clock_timestamp() WHERE id = $1;

-- name: RecordFailure
INSERT INTO envelope_attempts (envelope_id, failures, last_error, last_failed_at)
VALUES ($1, 1, $2, now())
ON CONFLICT (envelope_id) DO UPDATE SET failures = envelope_attempts.failures + 1,
	last_error = excluded.last_error, last_failed_at = now();

