-- The statements of a first file read without staging (firstfile.go); the
-- Go beside each says when it runs.

-- name: FirstRowTaken
SELECT EXISTS (SELECT 1 FROM records WHERE partner_id = $1 AND pay_period = $2),
	EXISTS (SELECT 1 FROM period_locks WHERE partner_id = $1 AND pay_period = $2),
	EXISTS (SELECT 1 FROM employees WHERE partner_id = $1 AND employee_ref = $3),
	coalesce((SELECT unknown_employee = 'create' FROM partners WHERE id = $1), false);

-- name: UnmappedRefs
SELECT count(*) FROM unnest(@refs::text[]) r(employee_ref)
WHERE NOT EXISTS (SELECT 1 FROM employees em WHERE em.partner_id = @partner AND em.employee_ref = r.employee_ref);

-- name: OnboardRefs
INSERT INTO employees (partner_id, employee_ref, employee_id, source)
SELECT @partner, u.employee_ref, derived_employee_id(@partner, u.employee_ref), 'derived'
FROM unnest(@refs::text[]) u(employee_ref)
WHERE NOT EXISTS (SELECT 1 FROM employees em WHERE em.partner_id = @partner AND em.employee_ref = u.employee_ref)
ORDER BY u.employee_ref COLLATE "C";

-- name: PeriodsLocked
SELECT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = $1 AND pay_period = ANY ($2::text[]));
