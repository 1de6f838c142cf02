-- +goose Up

-- records_have_employees (00030, 00192) ran a static query, and PL/pgSQL
-- keeps a static query's plan for the rest of the connection: the plan
-- made for the first statement that fired the trigger on that connection.
-- After a webhook's one record (planned as index probes) a 1,000,000-row
-- file on the same connection probed the index once per distinct employee:
-- 1.67 s for the check under auto_explain, against 0.46 s with the hash of
-- the mappings planned for its size. The query is now run with EXECUTE, so
-- it is planned for each statement with that statement's row count: index
-- probes for a webhook's record or a 10,000-row file, a hash anti-join for
-- 1,000,000 records. Still one check per distinct employee (without the
-- DISTINCT a 10,000-row file probed the index once per record: 20 ms of
-- backend CPU against 5 ms). No LIMIT: it would make the planner take the
-- fastest-starting plan (00192). The same check, the same error.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_have_employees() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing_partner text;
    missing_ref text;
BEGIN
    -- EXECUTE sets no FOUND: a row found has a partner_id (NOT NULL).
    EXECUTE 'SELECT n.partner_id, n.employee_ref FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n
        WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
        INTO missing_partner, missing_ref;
    IF missing_partner IS NOT NULL THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing_partner, missing_ref
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
