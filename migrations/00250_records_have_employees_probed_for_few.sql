-- +goose Up

-- records_have_employees (00235) let the planner choose, per statement,
-- between one index probe per distinct employee and a hash anti-join that
-- reads every mapping of every partner. Its cost model prices a probe like
-- a page read from disk, so it hashed the whole table long after probing
-- was cheaper: a 10,000-row file (2,000 employees) against 60,000-84,000
-- mappings hashed them all, 38-50 ms for the check, against 6.2-6.8 ms
-- probed; it took the probes itself only somewhere past 84,000 (at 217,000
-- it did). The cost grew with the other partners, not with the file. The
-- statement's records are now counted (the count stops at the bound), and
-- a statement of at most 20 records per page of employees (~80 mappings a
-- page: at most one record per four mappings, so even a file of one record
-- per employee probes at most a quarter of the table, which costs no more
-- than hashing it) probes the primary key once per distinct employee
-- (LATERAL with LIMIT 1, which the planner cannot turn into a hash). A
-- larger one (a first file, whose new mappings are much of the table)
-- keeps the hash planned for its size. The same check, the same error;
-- BENCHMARKS.md (issue 15, "10k latency (session 15)").
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

-- +goose Down
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
