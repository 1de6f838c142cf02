-- name: FindRecord
SELECT r.id, r.partner_id, r.employee_ref, e.employee_id, r.pay_period, r.component, r.amount::text, r.currency,
	coalesce(r.hours::text, ''), coalesce(r.rate::text, ''), coalesce(r.pay_date::text, ''),
	r.version, coalesce(r.locked_reason, ''), r.updated_at
FROM records r JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
WHERE r.partner_id = $1 AND r.employee_ref = $2 AND r.pay_period = $3 AND r.component = $4;

