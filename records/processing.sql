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

-- The temporary tables of processing (package apply), dropped at commit;
-- the statements above and apply's read them.

-- name: CreateStage
-- stage holds the file's rows as normalised in Go, already typed (numbers
-- and dates are parsed by COPY, while Go prepares the next rows); the d_*
-- values are the values as sent where they differ from the normalised ones
-- (an invalid row has only those). key_hash is a 64-bit hash of the natural key, so finding the keys
-- that repeat in a file is a cheap aggregate over one integer (the few
-- candidates are then compared on the real key).
CREATE TEMP TABLE stage (
	row_no integer NOT NULL, line integer NOT NULL,
	employee_ref text, pay_period text, component text, amount numeric, currency text,
	hours numeric, rate numeric, pay_date date, content_hash bytea, key_hash bigint,
	d_employee_ref text, d_pay_period text, d_component text, d_amount text, d_currency text,
	code text, field text, message text
) ON COMMIT DROP;

-- name: CreateClassified
-- classify's decision for each staged row: its outcome, code, message and
-- field (its line of the result file is composed in Go from them).
CREATE TEMP TABLE classified (
	row_no integer NOT NULL, line integer NOT NULL,
	employee_ref text, pay_period text, component text,
	amount numeric, currency text, hours numeric, rate numeric, pay_date date,
	content_hash bytea, record_id bigint,
	outcome text NOT NULL, code text, message text, field text
) ON COMMIT DROP;

-- name: CreateEmpRefs
-- emp_refs holds a file's distinct employee references (apply's empRefs), as
-- staged. Without statistics: the planner takes its row count from its
-- size, which is what the plans need (grouped, it would guess 200 distinct
-- references and probe the indexes once per reference).
CREATE TEMP TABLE emp_refs (employee_ref text) ON COMMIT DROP;

-- name: CreateEmp
-- The file's employees without a mapping, with the id onboarding would give.
CREATE TEMP TABLE emp (employee_ref text NOT NULL, derived_id text NOT NULL, kind text) ON COMMIT DROP;
