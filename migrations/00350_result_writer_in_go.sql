-- +goose Up

-- Result files and review reports are composed by one Go writer
-- (normalize.AppendResultLine: apply for result files, records for review
-- reports and whole-file rejections), so the SQL functions that repeated
-- its rules leave: result_line, csv_field (whose \s followed the
-- database's locale; Go's normalize.IsResultSpace states it), csv_safe and
-- review_report_csv, and the trigger that wrote review reports, which
-- records.WriteReviewReports writes where exceptions close.
DROP TRIGGER exceptions_review_report ON exceptions;
DROP FUNCTION exceptions_review_report();
DROP FUNCTION review_report_csv(bigint);
DROP FUNCTION result_line(integer, integer, text, text, text, text, text, text, text, text, text, text);
DROP FUNCTION csv_safe(text);
DROP FUNCTION csv_field(text);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION csv_field(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT CASE
        WHEN v IS NULL THEN ''
        WHEN v ~ E'[",\r\n]' OR v ~ '^\s' OR v ~ '\s$' THEN '"' || replace(v, '"', '""') || '"'
        ELSE v
    END
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION csv_safe(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT CASE
        WHEN v ~ '^[\t\r]' THEN '''' || v
        WHEN r ~ '^[=+\-@]' AND r !~ '^[+-]?[0-9]+([.,][0-9]+)?$' THEN '''' || v
        ELSE v
    END
    FROM (SELECT regexp_replace(v, '^[\u0001-\u0020\u007F-\u00A0\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u1680\u180E\u2000-\u200F\u2028-\u202F\u205F-\u2064\u2066-\u206F\u3000\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]+', '') AS r) s
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION result_line(line integer, row_no integer, outcome text, echoed text, employee_ref text, pay_period text, component text, amount text, currency text, code text, field text, message text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT line::text || ',' || row_no::text || ',' || outcome || ',' ||
        coalesce(echoed, csv_field(employee_ref) || ',' || csv_field(pay_period) || ',' ||
            csv_field(component) || ',' || csv_field(amount) || ',' || csv_field(currency)) || ',' ||
        CASE WHEN code IS NULL AND field IS NULL AND message IS NULL THEN ',,'
            ELSE csv_field(code) || ',' || csv_field(field) || ',' || csv_field(message) END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION review_report_csv(env bigint) RETURNS bytea
    LANGUAGE sql STABLE
    AS $$
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

-- +goose StatementBegin
CREATE FUNCTION exceptions_review_report() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO envelope_reviews (envelope_id, data)
    SELECT c.envelope_id, review_report_csv(c.envelope_id)
    FROM (SELECT DISTINCT envelope_id FROM changed WHERE envelope_id IS NOT NULL AND status <> 'open') c
    WHERE NOT EXISTS (SELECT 1 FROM exceptions x WHERE x.envelope_id = c.envelope_id AND x.status = 'open')
    ON CONFLICT (envelope_id) DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER exceptions_review_report AFTER UPDATE ON exceptions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION exceptions_review_report();
