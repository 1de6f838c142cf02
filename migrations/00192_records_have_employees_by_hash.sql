-- +goose Up

-- records_have_employees (00030) looked for a new record's employee with
-- LIMIT 1, which made the planner pick the plan that starts fastest: one
-- index probe per distinct employee of the statement, each with a heap
-- fetch (the mappings onboarded in the same transaction are not yet
-- all-visible). For a first file's 182,062 employees that was 3.55 s of
-- the records insert under auto_explain. Without LIMIT (SELECT INTO keeps
-- the first row all the same) the planner costs the whole anti-join and
-- hashes the mappings when the statement has many employees (1.87 s), and
-- still probes the index for a few (a webhook's one record) or when the
-- mappings far outnumber them. The same check.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_have_employees() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing record;
BEGIN
    -- One check per distinct employee, not per record (a file has several
    -- records per employee).
    SELECT n.partner_id, n.employee_ref INTO missing
    FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n
    WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref);
    IF FOUND THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing.partner_id, missing.employee_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_have_employees() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing record;
BEGIN
    SELECT n.partner_id, n.employee_ref INTO missing
    FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n
    WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing.partner_id, missing.employee_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
