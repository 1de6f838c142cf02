-- name: ReviewReports
SELECT v.envelope_id, e.partner_id, e.file_name, coalesce(s.size, length(v.data)), v.created_at, s.envelope_id IS NOT NULL
FROM envelope_reviews v JOIN envelopes e ON e.id = v.envelope_id
LEFT JOIN sealed_results s ON s.envelope_id = v.envelope_id AND s.kind = 'review'
WHERE e.partner_id = $1 ORDER BY v.envelope_id;

-- name: ReviewReport
SELECT data FROM envelope_reviews WHERE envelope_id = $1;

