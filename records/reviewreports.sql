-- name: ReviewReports
SELECT v.envelope_id, e.partner_id, e.file_name, length(v.data), v.created_at
FROM envelope_reviews v JOIN envelopes e ON e.id = v.envelope_id
WHERE e.partner_id = $1 ORDER BY v.envelope_id;

-- name: ReviewReport
SELECT data FROM envelope_reviews WHERE envelope_id = $1;

