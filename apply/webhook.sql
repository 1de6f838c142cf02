-- name: ClassifiedWebhookChange
-- What classify decided for a webhook's one-row stage, with the record and
-- open exception of its key and its employee's id (the mapped one, or the
-- one approval would give a held unknown employee).
SELECT c.outcome, coalesce(c.code, ''), coalesce(c.message, ''), r.id, coalesce(x.id, 0),
	CASE WHEN c.outcome <> 'rejected' THEN coalesce(em.employee_id, derived_employee_id($1, c.employee_ref)) ELSE '' END
FROM classified c
LEFT JOIN employees em ON em.partner_id = $1 AND em.employee_ref = c.employee_ref
LEFT JOIN records r ON r.partner_id = $1 AND r.employee_ref = c.employee_ref
	AND r.pay_period = c.pay_period AND r.component = c.component
LEFT JOIN exceptions x ON x.status = 'open' AND x.partner_id = $1 AND x.employee_ref = c.employee_ref
	AND x.pay_period = c.pay_period AND x.component = c.component;
