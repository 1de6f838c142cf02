-- The statements of a resubmission compared on its keys
-- (resubmission.go); the Go beside each says what it does and why.

-- name: SampleChanged
SELECT count(*) FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[]) AS s(employee_ref, pay_period, component, content_hash)
LEFT JOIN LATERAL (SELECT r.content_hash FROM records r WHERE r.partner_id = $1
	AND r.employee_ref = s.employee_ref AND r.pay_period = s.pay_period AND r.component = s.component LIMIT 1) r ON true
WHERE r.content_hash IS DISTINCT FROM s.content_hash OR s.content_hash IS NULL;

-- name: CreateStageKeys
CREATE TEMP TABLE stage_keys (
	row_no integer NOT NULL, employee_ref text, pay_period text, component text, content_hash bytea, key_hash bigint
) ON COMMIT DROP;

-- name: ChangedRows
SELECT s.row_no FROM stage_keys s
LEFT JOIN records r ON r.partner_id = $1
	AND r.employee_ref = s.employee_ref AND r.pay_period = s.pay_period AND r.component = s.component
WHERE r.content_hash IS DISTINCT FROM s.content_hash OR s.content_hash IS NULL;

-- name: ConfirmSeq
UPDATE records r SET last_seq = @seq::bigint
FROM stage_keys s
WHERE r.partner_id = @partner
	AND r.employee_ref = s.employee_ref AND r.pay_period = s.pay_period AND r.component = s.component
	AND r.content_hash = s.content_hash AND (r.last_seq IS NULL OR r.last_seq < @seq::bigint);
