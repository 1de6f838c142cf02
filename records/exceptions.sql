-- name: ExceptionLinks
SELECT coalesce(record_id, 0), coalesce(row_no, 0), coalesce(superseded_by, 0)
FROM exceptions WHERE id = $1;

-- name: RecordVersions
SELECT v.version, v.amount::text, v.currency, coalesce(v.hours::text, ''), coalesce(v.rate::text, ''),
	coalesce(v.pay_date::text, ''), coalesce(e.file_name, ''), coalesce(v.line, 0), v.written_at, v.replaced_at, v.replaced_by
FROM (
	SELECT version, amount, currency, hours, rate, pay_date, envelope_id, line, updated_at AS written_at,
		NULL::timestamptz AS replaced_at, '' AS replaced_by
	FROM records WHERE id = $1
	UNION ALL
	SELECT version, amount, currency, hours, rate, pay_date, envelope_id, line, written_at, replaced_at, replaced_by
	FROM record_history WHERE record_id = $1
) v LEFT JOIN envelopes e ON e.id = v.envelope_id
ORDER BY v.version DESC;

-- fragment: amount_change
-- An exception's amount change: proposed minus locked (the proposed amount
-- for a held new record).
((x.proposed ->> 'amount')::numeric - coalesce((x.current ->> 'amount')::numeric, 0))

-- fragment: queue_where
-- The filter of Exceptions and ExceptionCounts, on ExceptionFilter.args().
(cardinality($1::text[]) = 0 OR x.partner_id = ANY($1::text[]))
	AND ($2 = '' OR x.partner_id = $2) AND ($3 = '' OR x.pay_period = $3)
	AND ($4 = '' OR x.envelope_id IN (SELECT fe.id FROM envelopes fe WHERE fe.partner_id = x.partner_id AND lower(fe.file_name) = lower($4)))
	AND ($5 = '' OR x.code = $5) AND ($6 = '' OR x.component = $6)
	AND ($7 = '' OR starts_with(lower(x.employee_ref), lower($7)) OR EXISTS (SELECT 1 FROM employees m
		WHERE m.partner_id = x.partner_id AND m.employee_ref = x.employee_ref AND m.employee_id = $7))
	AND ($8 = '' OR abs({{amount_change}}) >= $8::numeric)
	AND ($9 = '' OR abs({{amount_change}}) <= $9::numeric)

-- name: Exceptions
SELECT {{exception_columns}}
FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id
WHERE {{queue_where}} AND ($10 = '' OR x.status = $10) AND x.id > $11
ORDER BY x.id LIMIT $12;

-- name: Exception
SELECT {{exception_columns}}
FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id WHERE x.id = $1;

-- name: ExceptionCounts
SELECT x.status, count(*) FROM exceptions x WHERE {{queue_where}} GROUP BY x.status;

