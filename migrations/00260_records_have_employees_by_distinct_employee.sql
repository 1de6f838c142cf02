-- +goose Up

-- records_have_employees (00250) chose between probing the mappings once
-- per distinct employee and hashing them all by the statement's count of
-- records, a bound on its distinct employees that was cheap to take. A file
-- has several records per employee (a 10,000-row file, 2,000 employees), so
-- on a cluster of up to 40,000 mappings it hashed them all where 2,000
-- probes cost less: the check of such a file took 8.5 ms against 30,000
-- mappings. The statement's distinct employees are now collected once, into
-- two arrays, and the choice counts them: at most 20 per page of mappings
-- (one per four mappings) probes the primary key once each, as before; more
-- hash the mappings, planned for the arrays' size. The same check, the same
-- error; BENCHMARKS.md (issue 15, session 18).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_have_employees() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    probe_max bigint := 20 * (pg_relation_size('employees') / current_setting('block_size')::bigint);
    partner_ids text[];
    refs text[];
    missing_partner text;
    missing_ref text;
BEGIN
    SELECT array_agg(n.partner_id), array_agg(n.employee_ref) INTO partner_ids, refs
    FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n;
    IF refs IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(refs) <= probe_max THEN
        SELECT n.partner_id, n.employee_ref INTO missing_partner, missing_ref
        FROM unnest(partner_ids, refs) n(partner_id, employee_ref)
        LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
            WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
        WHERE m.mapped IS NULL;
    ELSE
        -- EXECUTE plans for the arrays' size; it sets no FOUND: a row
        -- found has a partner_id (never NULL).
        EXECUTE 'SELECT n.partner_id, n.employee_ref FROM unnest($1, $2) n(partner_id, employee_ref)
            WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
            INTO missing_partner, missing_ref USING partner_ids, refs;
    END IF;
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
    probe_max bigint := 20 * (pg_relation_size('employees') / current_setting('block_size')::bigint);
    few boolean;
    missing_partner text;
    missing_ref text;
BEGIN
    SELECT count(*) <= probe_max INTO few FROM (SELECT FROM new_records LIMIT probe_max + 1) n;
    IF few THEN
        SELECT n.partner_id, n.employee_ref INTO missing_partner, missing_ref
        FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n
        LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
            WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
        WHERE m.mapped IS NULL;
    ELSE
        -- EXECUTE sets no FOUND: a row found has a partner_id (NOT NULL).
        EXECUTE 'SELECT n.partner_id, n.employee_ref FROM (SELECT DISTINCT partner_id, employee_ref FROM new_records) n
            WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
            INTO missing_partner, missing_ref;
    END IF;
    IF missing_partner IS NOT NULL THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing_partner, missing_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
