-- name: ExceptionPartner
SELECT partner_id FROM exceptions WHERE id = $1;

-- name: ExceptionsToDecide
SELECT id, status, coalesce(decided_by, ''), decided_at, coalesce(superseded_by, 0), record_id IS NULL, code
FROM exceptions WHERE id = ANY($1) ORDER BY id;

-- name: DecideExceptions
UPDATE exceptions SET status = $2, decided_by = $3, decided_at = now(), note = nullif($4, '')
WHERE id = ANY($1) AND status = 'open'
RETURNING envelope_id;

-- name: AuditDecisions
INSERT INTO review_audit (actor, via, action, exception_id, partner_id, detail)
SELECT $2, $3, $4, id, $5, $6 FROM unnest($1::bigint[]) AS id ORDER BY id;

-- name: KeepApprovedHistory
INSERT INTO record_history (record_id, version, amount, currency, hours, rate, pay_date, content_hash,
	envelope_id, line, written_at, replaced_by)
SELECT r.id, r.version, r.amount, r.currency, r.hours, r.rate, r.pay_date, r.content_hash,
	r.envelope_id, r.line, r.updated_at, format('exception %s approved by %s', x.id, $2::text)
FROM exceptions x JOIN records r ON r.id = x.record_id WHERE x.id = ANY($1);

-- name: ApplyApprovedChanges
UPDATE records r SET amount = (x.proposed ->> 'amount')::numeric, currency = x.proposed ->> 'currency',
	hours = nullif(x.proposed ->> 'hours', '')::numeric, rate = nullif(x.proposed ->> 'rate', '')::numeric,
	pay_date = nullif(x.proposed ->> 'pay_date', '')::date, content_hash = x.proposed_hash,
	version = r.version + 1, last_seq = greatest(r.last_seq, e.seq),
	envelope_id = x.envelope_id, line = x.line, updated_at = now()
FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id
WHERE x.id = ANY($1) AND r.id = x.record_id;

-- name: OnboardApprovedEmployees
INSERT INTO employees (partner_id, employee_ref, employee_id, source)
SELECT DISTINCT partner_id, employee_ref, derived_employee_id(partner_id, employee_ref), 'derived'
FROM exceptions WHERE id = ANY($1)
ON CONFLICT (partner_id, employee_ref) DO NOTHING;

-- name: CreateApprovedRecords
WITH created AS (
	INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, hours, rate,
		pay_date, content_hash, last_seq, envelope_id, line, locked_reason, locked_at)
	SELECT x.partner_id, x.employee_ref, x.pay_period, x.component, (x.proposed ->> 'amount')::numeric,
		x.proposed ->> 'currency', nullif(x.proposed ->> 'hours', '')::numeric, nullif(x.proposed ->> 'rate', '')::numeric,
		nullif(x.proposed ->> 'pay_date', '')::date, x.proposed_hash, e.seq, x.envelope_id, x.line,
		pl.reason, CASE WHEN pl.reason IS NOT NULL THEN now() END
	FROM exceptions x
	LEFT JOIN envelopes e ON e.id = x.envelope_id
	LEFT JOIN period_locks pl ON pl.partner_id = x.partner_id AND pl.pay_period = x.pay_period
	WHERE x.id = ANY($1)
	RETURNING id, partner_id, employee_ref, pay_period, component)
UPDATE exceptions x SET record_id = c.id FROM created c
WHERE x.id = ANY($1) AND x.partner_id = c.partner_id AND x.employee_ref = c.employee_ref
	AND x.pay_period = c.pay_period AND x.component = c.component;

-- name: StaleExceptions
-- record_json builds the same object apply/classify.go stores as an
-- exception's "current" (fieldsJSON).
SELECT x.id, r.id, r.version, true FROM exceptions x
JOIN records r ON r.partner_id = x.partner_id AND r.employee_ref = x.employee_ref
	AND r.pay_period = x.pay_period AND r.component = x.component
WHERE x.id = ANY($1) AND x.record_id IS NULL
UNION ALL
SELECT x.id, r.id, r.version, false FROM exceptions x JOIN records r ON r.id = x.record_id
WHERE x.id = ANY($1) AND {{record_json}} IS DISTINCT FROM x.current;
