-- +goose Up

-- result_header is the first line of every result file and review report,
-- without its line break: normalize.ResultHeader, which Go writes, in the
-- one place SQL has it (migrations.TestResultHeaderMatches compares them).
-- +goose StatementBegin
CREATE FUNCTION result_header() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message'
$$;
-- +goose StatementEnd

-- The review report's header is result_header(), no longer a copy.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION review_report_csv(env bigint) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT convert_to(result_header() || E'\n' ||
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
DROP FUNCTION result_header();
