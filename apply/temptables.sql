-- The temporary tables of processing, created in its transaction and dropped
-- at commit: classify and the apply statements (classify.go) read them.

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
-- emp_refs holds a file's distinct employee references (empRefs), as
-- staged. Without statistics: the planner takes its row count from its
-- size, which is what the plans need (grouped, it would guess 200 distinct
-- references and probe the indexes once per reference).
CREATE TEMP TABLE emp_refs (employee_ref text) ON COMMIT DROP;

-- name: CreateEmp
-- The file's employees without a mapping, with the id onboarding would give.
CREATE TEMP TABLE emp (employee_ref text NOT NULL, derived_id text NOT NULL, kind text) ON COMMIT DROP;
