-- name: StoreFileRejectResult
-- A whole-file rejection's result: the header ($2), then row 0 rejected
-- ($7) at line $3 with code, field and message ($4..$6), by result_line as
-- every line of a result file. Returns its size.
INSERT INTO envelope_results (envelope_id, n, data)
SELECT $1, 0, convert_to($2::text || result_line($3, 0, $7, NULL, NULL, NULL, NULL, NULL, NULL, $4, $5, $6) || E'\n', 'UTF8')
RETURNING length(data);

-- name: CloseRejectedEnvelope
UPDATE envelopes SET status = $2, counts = $3, result_size = $4, seq = $5, processed_at = clock_timestamp() WHERE id = $1;

-- name: RecordFailure
INSERT INTO envelope_attempts (envelope_id, failures, last_error, last_failed_at)
VALUES ($1, 1, $2, now())
ON CONFLICT (envelope_id) DO UPDATE SET failures = envelope_attempts.failures + 1,
	last_error = excluded.last_error, last_failed_at = now();

