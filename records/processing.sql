-- name: StoreFileRejectResult
-- A whole-file rejection's result: the header ($2), then row 0 rejected
-- ($7) at line $3 with code, field and message quoted by csv_field, as
-- every line the database writes. Returns its size.
INSERT INTO envelope_results (envelope_id, n, data)
SELECT $1, 0, convert_to($2::text || concat_ws(',', $3::integer, 0, $7::text, '', '', '', '', '',
	csv_field($4), csv_field($5), csv_field($6)) || E'\n', 'UTF8')
RETURNING length(data);

-- name: CloseRejectedEnvelope
UPDATE envelopes SET status = $2, counts = $3, result_size = $4, seq = $5, processed_at = clock_timestamp() WHERE id = $1;

-- name: RecordFailure
INSERT INTO envelope_attempts (envelope_id, failures, last_error, last_failed_at)
VALUES ($1, 1, $2, now())
ON CONFLICT (envelope_id) DO UPDATE SET failures = envelope_attempts.failures + 1,
	last_error = excluded.last_error, last_failed_at = now();

