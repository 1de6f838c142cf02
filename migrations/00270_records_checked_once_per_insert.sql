-- +goose Up

-- A statement that inserts records was checked by two statement triggers,
-- each reading the whole transition table: records_have_employees (00030,
-- 00260) for the distinct employees, then records_references_insert (00005)
-- for the distinct partners and envelopes. At 1,000,000 records each read
-- is ~150 ms of the table spilled to a temporary file before any hashing.
-- One trigger, records_check_insert, now reads it once, with both hash
-- tables in one grouping-sets aggregate, and checks the same in the same
-- order (employees first, as the triggers fired by name), with the same
-- errors. An UPDATE keeps records_references_update (00005).
--
-- And the employee check of many employees (a first file) hashed every
-- partner's mappings against the statement's employees: the planner,
-- knowing neither side's partners, sorted both sides for a merge anti join,
-- ~730 ms of a 1,000,000-row first file's check against 200,000 mappings.
-- It now reads only the statement's partners' mappings (the primary key
-- starts with partner_id) and hashes them: ~230 ms, and it no longer grows
-- with other partners' mappings. BENCHMARKS.md (issue 15, session 19).
-- +goose StatementBegin
CREATE FUNCTION records_check_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    probe_max bigint := 20 * (pg_relation_size('employees') / current_setting('block_size')::bigint);
    emp_partners text[];
    refs text[];
    partner_ids text[];
    envelope_ids bigint[];
    missing_partner text;
    missing_ref text;
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows, two hash tables: the distinct employees
    -- (g = 1) and the distinct partner and envelope references (g = 2).
    SELECT array_agg(k.partner_id) FILTER (WHERE k.g = 1), array_agg(k.employee_ref) FILTER (WHERE k.g = 1),
           array_agg(DISTINCT k.partner_id) FILTER (WHERE k.g = 2), array_remove(array_agg(DISTINCT k.envelope_id) FILTER (WHERE k.g = 2), NULL)
    INTO emp_partners, refs, partner_ids, envelope_ids
    FROM (SELECT partner_id, employee_ref, envelope_id, GROUPING(employee_ref, envelope_id) AS g FROM new_rows
          GROUP BY GROUPING SETS ((partner_id, employee_ref), (partner_id, envelope_id))) k;
    IF refs IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(refs) <= probe_max THEN
        -- Few employees for the mappings there are: one probe each.
        SELECT n.partner_id, n.employee_ref INTO missing_partner, missing_ref
        FROM unnest(emp_partners, refs) n(partner_id, employee_ref)
        LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
            WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
        WHERE m.mapped IS NULL;
    ELSE
        -- Many: the statement's partners' mappings hashed, read by the
        -- primary key's leading partner_id, not every partner's. EXECUTE
        -- plans for the arrays' size; it sets no FOUND: a row found has a
        -- partner_id (never NULL).
        EXECUTE 'SELECT n.partner_id, n.employee_ref FROM unnest($1, $2) n(partner_id, employee_ref)
            WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = ANY ($3)
                AND e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
            INTO missing_partner, missing_ref USING emp_partners, refs, partner_ids;
    END IF;
    IF missing_partner IS NOT NULL THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing_partner, missing_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    -- The references, as records_check_references (00005) checks them: the
    -- FOR KEY SHARE locks a foreign key takes, the error it raises.
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER records_have_employees ON records;
DROP TRIGGER records_references_insert ON records;
DROP FUNCTION records_have_employees();
CREATE TRIGGER records_check_insert AFTER INSERT ON records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_insert();

-- +goose Down
DROP TRIGGER records_check_insert ON records;
DROP FUNCTION records_check_insert();
-- +goose StatementBegin
CREATE FUNCTION records_have_employees() RETURNS trigger
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
CREATE TRIGGER records_have_employees AFTER INSERT ON records
    REFERENCING NEW TABLE AS new_records
    FOR EACH STATEMENT EXECUTE FUNCTION records_have_employees();
CREATE TRIGGER records_references_insert AFTER INSERT ON records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_references();
