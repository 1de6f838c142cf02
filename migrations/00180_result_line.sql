-- +goose Up

-- result_line is one line of a result file (NAME.result.csv) or review
-- report (NAME.review.csv), without its line break, in the columns of
-- normalize.ResultHeader: line and row as numbers, the outcome as given
-- (one of the outcome words), the five echoed cells employee_ref ..
-- currency, then code, field and message. Every cell is quoted by
-- csv_field (NULL and '' are an empty cell). echoed, when not NULL, is
-- the five echoed cells already quoted by the same rule and joined by
-- commas (normalize.AppendResultCells does that while rows are staged),
-- and the five values after it are then not read. Formula escaping
-- (csv_safe) is the caller's: a value is written as given.
--
-- normalize.AppendResultLine is the same rule in Go;
-- migrations.TestResultLineMatchesAppendResultLine runs both. Written with
-- || rather than concat/concat_ws (which are only STABLE), so the function
-- is truly IMMUTABLE and PostgreSQL inlines it, csv_field too, into the
-- statement that calls it: it costs what the expression written out did.
-- +goose StatementBegin
CREATE FUNCTION result_line(line integer, row_no integer, outcome text, echoed text,
    employee_ref text, pay_period text, component text, amount text, currency text,
    code text, field text, message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT line::text || ',' || row_no::text || ',' || outcome || ',' ||
        coalesce(echoed, csv_field(employee_ref) || ',' || csv_field(pay_period) || ',' ||
            csv_field(component) || ',' || csv_field(amount) || ',' || csv_field(currency)) || ',' ||
        CASE WHEN code IS NULL AND field IS NULL AND message IS NULL THEN ',,'
            ELSE csv_field(code) || ',' || csv_field(field) || ',' || csv_field(message) END
$$;
-- +goose StatementEnd

-- The review report's lines are result lines too.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION review_report_csv(env bigint) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT convert_to('line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message' || E'\n' ||
        coalesce(string_agg(result_line(
            coalesce(x.line, 0), coalesce(x.row_no, 0),
            CASE x.status WHEN 'approved' THEN 'approved' ELSE 'rejected' END, NULL,
            csv_safe(x.employee_ref), csv_safe(x.pay_period), csv_safe(x.component),
            x.proposed ->> 'amount', x.proposed ->> 'currency',
            CASE x.status WHEN 'approved' THEN NULL WHEN 'rejected' THEN 'rejected_by_reviewer' ELSE 'superseded' END,
            NULL,
            csv_safe(CASE x.status
                WHEN 'approved' THEN 'a reviewer approved this change and it was applied; the record stays locked'
                WHEN 'rejected' THEN 'a reviewer rejected this change, so the record keeps its locked values'
                ELSE 'this change was not applied: a later file proposed a different change for the same record, which is reviewed instead'
            END || CASE WHEN coalesce(x.note, '') <> '' AND x.status <> 'superseded'
                THEN '; reviewer''s note: ' || x.note ELSE '' END)
        ) || E'\n', '' ORDER BY x.line, x.id), ''), 'UTF8')
    FROM exceptions x WHERE x.envelope_id = env
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION review_report_csv(env bigint) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT convert_to('line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message' || E'\n' ||
        coalesce(string_agg(concat_ws(',',
            coalesce(x.line, 0), coalesce(x.row_no, 0),
            CASE x.status WHEN 'approved' THEN 'approved' ELSE 'rejected' END,
            csv_field(csv_safe(x.employee_ref)), csv_field(csv_safe(x.pay_period)), csv_field(csv_safe(x.component)),
            csv_field(x.proposed ->> 'amount'), csv_field(x.proposed ->> 'currency'),
            CASE x.status WHEN 'approved' THEN '' WHEN 'rejected' THEN 'rejected_by_reviewer' ELSE 'superseded' END,
            '',
            csv_field(csv_safe(CASE x.status
                WHEN 'approved' THEN 'a reviewer approved this change and it was applied; the record stays locked'
                WHEN 'rejected' THEN 'a reviewer rejected this change, so the record keeps its locked values'
                ELSE 'this change was not applied: a later file proposed a different change for the same record, which is reviewed instead'
            END || CASE WHEN coalesce(x.note, '') <> '' AND x.status <> 'superseded'
                THEN '; reviewer''s note: ' || x.note ELSE '' END))
        ) || E'\n', '' ORDER BY x.line, x.id), ''), 'UTF8')
    FROM exceptions x WHERE x.envelope_id = env
$$;
-- +goose StatementEnd
DROP FUNCTION result_line(integer, integer, text, text, text, text, text, text, text, text, text, text);
