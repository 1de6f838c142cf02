-- name: ReviewReports
SELECT v.envelope_id, e.partner_id, e.file_name, coalesce(s.size, length(v.data)), v.created_at, s.envelope_id IS NOT NULL
FROM envelope_reviews v JOIN envelopes e ON e.id = v.envelope_id
LEFT JOIN sealed_results s ON s.envelope_id = v.envelope_id AND s.kind = 'review'
WHERE e.partner_id = $1 ORDER BY v.envelope_id;

-- name: ReviewReport
SELECT data FROM envelope_reviews WHERE envelope_id = $1;


-- name: ClosedReviewEnvelopes
-- Which of the envelopes $1 (repeated, or NULL for a webhook's exception)
-- have no open exception left and no review report yet.
SELECT DISTINCT u.e FROM unnest($1::bigint[]) AS u(e)
WHERE u.e IS NOT NULL AND NOT EXISTS (SELECT 1 FROM exceptions x WHERE x.envelope_id = u.e AND x.status = 'open')
	AND NOT EXISTS (SELECT 1 FROM envelope_reviews v WHERE v.envelope_id = u.e)
ORDER BY u.e;

-- name: ReviewReportRows
-- An envelope's exceptions, as its review report lists them.
SELECT coalesce(x.line, 0), coalesce(x.row_no, 0), x.status, x.employee_ref, x.pay_period, x.component,
	coalesce(x.proposed ->> 'amount', ''), coalesce(x.proposed ->> 'currency', ''), coalesce(x.note, ''),
	x.code, coalesce(x.partner_code, '')
FROM exceptions x WHERE x.envelope_id = $1 ORDER BY x.line, x.id;

-- name: StoreReviewReport
INSERT INTO envelope_reviews (envelope_id, data) VALUES ($1, $2) ON CONFLICT (envelope_id) DO NOTHING;
