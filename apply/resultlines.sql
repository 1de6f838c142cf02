-- The statements of the result lines (resultlines.go).

-- name: ClassifiedLines
-- classify's decisions but the unchanged ones, in row order, for the merge
-- with staging's lines (spoolClassified).
SELECT row_no, outcome, coalesce(code, ''), coalesce(field, ''), coalesce(message, '')
FROM classified WHERE outcome <> 'unchanged' ORDER BY row_no;
