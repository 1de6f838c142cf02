-- name: ComponentApprovals
-- What approving rows held for their component code ($1) with component
-- $2 meets: each row's partner code, proposed values and file sequence,
-- and at its new key (the same employee and period, component $2) what
-- classify would ask (the record, its hash, lock and last sequence; the
-- closed period; the employee's mapping and the partner's policy), an
-- open exception of that key, and the meaning reviewers already gave the
-- code.
SELECT x.id, x.partner_code, x.proposed, e.seq, r.id, r.content_hash, r.last_seq,
	r.locked_reason IS NOT NULL, pl.reason IS NOT NULL, em.employee_ref IS NOT NULL OR r.id IS NOT NULL,
	p.unknown_employee, o.id, cc.component, cc.exception_id
FROM exceptions x
JOIN partners p ON p.id = x.partner_id
LEFT JOIN envelopes e ON e.id = x.envelope_id
LEFT JOIN records r ON r.partner_id = x.partner_id AND r.employee_ref = x.employee_ref
	AND r.pay_period = x.pay_period AND r.component = $2
LEFT JOIN period_locks pl ON pl.partner_id = x.partner_id AND pl.pay_period = x.pay_period
LEFT JOIN employees em ON em.partner_id = x.partner_id AND em.employee_ref = x.employee_ref
LEFT JOIN exceptions o ON o.status = 'open' AND o.id <> x.id AND o.partner_id = x.partner_id
	AND o.employee_ref = x.employee_ref AND o.pay_period = x.pay_period AND o.component = $2
LEFT JOIN component_codes cc ON cc.partner_id = x.partner_id AND cc.code = x.partner_code
WHERE x.id = ANY($1)
ORDER BY x.id;

-- name: RekeyException
-- A row held for its component code ($1) given component $2 (its content
-- hash $3) and the code it is now held with, if held ($4; else it stays
-- unknown_component and is approved): its key, proposal and record are
-- those of the row as read with that component.
UPDATE exceptions x SET component = $2, proposed = x.proposed || jsonb_build_object('component', $2::text),
	proposed_hash = $3, code = $4, record_id = r.id, current = CASE WHEN r.id IS NOT NULL THEN {{record_json}} END
FROM (SELECT $1::bigint AS id) k
LEFT JOIN exceptions y ON y.id = k.id
LEFT JOIN records r ON r.partner_id = y.partner_id AND r.employee_ref = y.employee_ref
	AND r.pay_period = y.pay_period AND r.component = $2
WHERE x.id = k.id;

-- name: ExceptionDiffering
-- The fields an exception's proposal changes, as classify writes them.
UPDATE exceptions x SET differing = {{differing}}
WHERE x.id = $1;

-- name: KeepComponentCode
-- The meaning a reviewer gave partner $1's code $2 (a second approval with
-- the same meaning keeps the first).
INSERT INTO component_codes (partner_id, code, component, exception_id, decided_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (partner_id, code) DO NOTHING;

-- name: ComponentCodes
-- What reviewers said partner $1's codes mean, by code.
SELECT code, component, exception_id, decided_by, decided_at FROM component_codes
WHERE partner_id = $1 ORDER BY code;
