-- +goose Up

-- csv_safe escapes exactly what normalize.SafeCell escapes (see its doc
-- comment for the rule): a value starting with tab or CR; or a value whose
-- first character after a leading run of blank and invisible characters is
-- = + - or @, unless what follows the run is a plain number. " =1+1",
-- NBSP or LF before "=" were echoed raw before. The run's characters are
-- normalize.FormulaLead, listed code point for code point: [[:space:]]
-- would depend on the database's locale. records.TestCSVSafeMatchesSafeCell
-- runs both on every code point.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION csv_safe(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ '^[\t\r]' THEN '''' || v
        WHEN r ~ '^[=+\-@]' AND r !~ '^[+-]?[0-9]+([.,][0-9]+)?$' THEN '''' || v
        ELSE v
    END
    FROM (SELECT regexp_replace(v, '^[\u0001-\u0020\u007F-\u00A0\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u1680\u180E\u2000-\u200F\u2028-\u202F\u205F-\u2064\u2066-\u206F\u3000\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]+', '') AS r) s
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION csv_safe(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ E'^[=+\\-@\t\r]' AND v !~ '^[+-]?[0-9]+([.,][0-9]+)?$' THEN '''' || v
        ELSE v
    END
$$;
-- +goose StatementEnd
