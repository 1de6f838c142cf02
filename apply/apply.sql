-- The statements of staging and classifying a file (apply.go) that are
-- written as they run; the Go beside each says when it runs.

-- name: ProcessSettings
-- The processing transaction's settings, in one round trip (tune).
SELECT set_config('work_mem', '64MB', true), set_config('jit', 'off', true),
	CASE WHEN pg_my_temp_schema() = 0 THEN set_config('temp_buffers', '256MB', true) END;

-- name: PeriodsTaken
-- Whether the partner has a record, and whether it has a period lock, in
-- any of the pay periods @periods.
SELECT EXISTS (SELECT 1 FROM records WHERE partner_id = @partner AND pay_period = ANY (@periods::text[])),
	EXISTS (SELECT 1 FROM period_locks WHERE partner_id = @partner AND pay_period = ANY (@periods::text[]));

-- name: EmployeeKinds
-- Whether any unmapped employee of the file is other than created
-- (rejected, taken or held).
SELECT EXISTS (SELECT 1 FROM emp WHERE kind IS NOT NULL);

-- name: AnalyzeEmp
ANALYZE emp;

-- name: PartnerHasLocks
-- Whether the partner has any closed period (classify joins period_locks
-- only then).
SELECT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = $1);

-- name: MaterialOff
-- No Materialize in classify's plan (classifyStaged says why) ...
SET LOCAL enable_material = off;

-- name: MaterialDefault
-- ... and back to the default after it.
SET LOCAL enable_material = DEFAULT;

-- name: CountOutcomes
SELECT outcome, count(*) FROM classified GROUP BY outcome;
