-- name: LockPartnerRow
-- NO KEY UPDATE: profile changes of one partner wait for each other, while
-- its uploads (which take a key share lock on the row) go on.
SELECT id FROM partners WHERE id = $1 FOR NO KEY UPDATE;

-- name: AddPartnerProfile
INSERT INTO partner_profiles (partner_id, version, yaml, mapping, set_by)
SELECT $1, coalesce(max(version), 0) + 1, $2, $3, $4 FROM partner_profiles WHERE partner_id = $1
RETURNING version, set_at;

-- name: PartnerProfile
SELECT {{profile_json}}, pp.yaml FROM partner_profiles pp
WHERE pp.partner_id = $1 AND ($2 = 0 OR pp.version = $2)
ORDER BY pp.version DESC LIMIT 1;

-- name: PartnerProfiles
SELECT {{profile_json}} FROM partner_profiles pp WHERE pp.partner_id = $1 ORDER BY pp.version;

-- name: RecordProfileVersion
UPDATE envelopes SET profile_version = $2 WHERE id = $1;

-- name: PreviewRows
-- What today's records say of each key of a file being previewed, read
-- only: whether a record has it (and its hash, lock), whether its period
-- is closed, whether its employee is mapped, and the partner's policy for
-- an unmapped one. An unmapped employee whose derived id another employee
-- has is rejected whatever the policy (classify's employee_taken), so its
-- policy reads as reject.
SELECT r.content_hash, r.locked_reason IS NOT NULL, pl.reason IS NOT NULL,
	em.employee_ref IS NOT NULL OR r.id IS NOT NULL,
	CASE WHEN em.employee_ref IS NULL AND r.id IS NULL AND EXISTS (
		SELECT 1 FROM employees t WHERE t.employee_id = derived_employee_id($1, f.employee_ref))
	THEN 'reject' ELSE p.unknown_employee END
FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS f (employee_ref, pay_period, component, i)
CROSS JOIN partners p
LEFT JOIN records r ON r.partner_id = $1 AND r.employee_ref = f.employee_ref
	AND r.pay_period = f.pay_period AND r.component = f.component
LEFT JOIN period_locks pl ON pl.partner_id = $1 AND pl.pay_period = f.pay_period
LEFT JOIN employees em ON em.partner_id = $1 AND em.employee_ref = f.employee_ref
WHERE p.id = $1
ORDER BY f.i;

-- name: NoteExcelResult
-- A csv-excel result is served with a 3-byte BOM and each LF as CR LF.
UPDATE envelopes SET result_format = 'csv-excel', result_size = coalesce(result_size, 0) + 3 + coalesce((
	SELECT sum(octet_length(data) - octet_length(replace(convert_from(data, 'UTF8'), E'\n', '')))
	FROM envelope_results WHERE envelope_id = $1), 0)
WHERE id = $1 RETURNING result_size;

-- name: SealedWorkbookResults
-- The partner's OpenPGP policy when its latest profile asks for results as
-- xlsx and its results may go sealed (no row: they agree).
SELECT p.pgp FROM partners p
WHERE p.id = $1 AND p.pgp <> 'off' AND (SELECT pp.mapping ->> 'results' FROM partner_profiles pp
	WHERE pp.partner_id = p.id ORDER BY pp.version DESC LIMIT 1) = 'xlsx';
