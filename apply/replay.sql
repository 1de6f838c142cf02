-- The statements of a leg replay (replay.go).

-- name: LegOutcomes
-- classify's decision for each staged leg, in row order.
SELECT row_no, outcome, coalesce(code, ''), coalesce(field, ''), coalesce(message, '')
FROM classified ORDER BY row_no;
