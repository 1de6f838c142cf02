-- The statements of classify.go written as they run (classify's own
-- statement and the apply statements that need a code or a field list
-- from Go are composed there); the Go beside each says when it runs.

-- employees_head and employees_tail are what Employees and EmpRefs
-- share: each unmapped reference u's derived id d and its kind.
--
-- Whether a derived id is taken is one probe of employees' employee_id
-- index per unmapped reference (tk, a LATERAL with LIMIT 1, which the
-- planner cannot turn into a hash). As an EXISTS in the CASE, PostgreSQL
-- chose a hashed subplan: a scan of every partner's mappings, hashed, for
-- each file, whose cost grows with other partners' mappings, not with the
-- file (several times the probes for a 10,000-row file among 200,000
-- mappings). For a file of ~180,000 new employees both cost about the same.
-- fragment: employees_head
INSERT INTO emp (employee_ref, derived_id, kind)
SELECT u.employee_ref, d.id,
	CASE
		WHEN tk.taken THEN 'employee_taken'
		WHEN pol.policy = 'reject' THEN 'unknown_rejected'
		WHEN pol.policy = 'hold' THEN 'unknown_held'
	END

-- fragment: employees_tail
CROSS JOIN (SELECT unknown_employee AS policy FROM partners WHERE id = @partner) pol
CROSS JOIN LATERAL (SELECT derived_employee_id(@partner, u.employee_ref) AS id) d
LEFT JOIN LATERAL (SELECT true AS taken FROM employees t WHERE t.employee_id = d.id LIMIT 1) tk ON true
WHERE NOT EXISTS (SELECT 1 FROM employees em WHERE em.partner_id = @partner AND em.employee_ref = u.employee_ref)

-- name: Employees
{{employees_head}}
FROM (SELECT DISTINCT employee_ref FROM stage WHERE code IS NULL) u
{{employees_tail}};

-- name: EmpRefs
{{employees_head}}
FROM emp_refs u
{{employees_tail}};

-- name: EmployeeRejects
SELECT EXISTS (SELECT 1 FROM emp WHERE kind IN ('employee_taken', 'unknown_rejected'));

-- name: ApplyHistory
INSERT INTO record_history (record_id, version, amount, currency, hours, rate, pay_date, content_hash,
	envelope_id, line, written_at, replaced_by)
SELECT r.id, r.version, r.amount, r.currency, r.hours, r.rate, r.pay_date, r.content_hash,
	r.envelope_id, r.line, r.updated_at, @by::text
FROM records r JOIN classified c ON c.record_id = r.id
WHERE c.outcome = 'updated';

-- name: ApplyUpdated
UPDATE records r SET amount = c.amount, currency = c.currency, hours = c.hours, rate = c.rate,
	pay_date = c.pay_date, content_hash = c.content_hash, version = r.version + 1,
	last_seq = coalesce(@seq::bigint, r.last_seq), envelope_id = @env::bigint, line = nullif(c.line, 0), updated_at = now()
FROM classified c
WHERE c.record_id = r.id AND c.outcome = 'updated';

-- name: ApplyUnchangedSeq
UPDATE records r SET last_seq = @seq::bigint
FROM classified c
WHERE @seq::bigint IS NOT NULL AND c.record_id = r.id AND c.outcome = 'unchanged'
	AND (r.last_seq IS NULL OR r.last_seq < @seq::bigint);

-- name: ApplySupersede
UPDATE exceptions e SET status = 'superseded', decided_at = now(),
	note = format('superseded by a different change in %s', @by::text)
		|| CASE WHEN c.line > 0 THEN format(', line %s', c.line) ELSE '' END
FROM classified c
WHERE c.outcome = 'held' AND e.status = 'open' AND e.partner_id = @partner
	AND e.employee_ref = c.employee_ref AND e.pay_period = c.pay_period AND e.component = c.component
	AND e.proposed_hash <> c.content_hash
RETURNING e.envelope_id;

-- name: ApplyLinkSuperseded
UPDATE exceptions o SET superseded_by = n.id
FROM exceptions n JOIN classified c ON c.outcome = 'held' AND c.employee_ref = n.employee_ref
	AND c.pay_period = n.pay_period AND c.component = n.component
WHERE n.partner_id = @partner AND n.status = 'open' AND o.partner_id = @partner AND o.status = 'superseded'
	AND o.superseded_by IS NULL AND o.employee_ref = n.employee_ref AND o.pay_period = n.pay_period
	AND o.component = n.component;
