-- name: Audit
INSERT INTO review_audit (actor, via, action, exception_id, partner_id, detail)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6);

-- name: AuditLog
SELECT id, at, actor, via, action, coalesce(exception_id, 0), coalesce(partner_id, ''), detail
FROM review_audit WHERE ($1 = 0 OR exception_id = $1) ORDER BY id DESC LIMIT $2;

