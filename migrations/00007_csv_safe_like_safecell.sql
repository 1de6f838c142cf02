-- +goose Up

-- csv_safe must escape exactly what normalize.SafeCell escapes, so a value
-- reads the same in NAME.result.csv and NAME.review.csv. SafeCell takes a
-- decimal comma as a number too ("-12,50"); csv_safe did not.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION csv_safe(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ E'^[=+\\-@\t\r]' AND v !~ '^[+-]?[0-9]+([.,][0-9]+)?$' THEN '''' || v
        ELSE v
    END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION csv_safe(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ E'^[=+\\-@\t\r]' AND v !~ '^[+-]?[0-9]+(\.[0-9]+)?$' THEN '''' || v
        ELSE v
    END
$$;
-- +goose StatementEnd
