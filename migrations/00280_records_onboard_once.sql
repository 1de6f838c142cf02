-- +goose Up

-- A pure first file of a partner that creates mappings is read once
-- (records/direct.go): its records are copied in while it is read, and
-- the references they name without a mapping are onboarded by this
-- trigger, at the end of the same statement, under their derived ids
-- (derived_employee_id), instead of by a statement before the records,
-- for which the file was read a first time to collect them. Only when the
-- transaction asks for it (payintake.onboard set to the partner, as the
-- file's statement does), only for that partner as the statement's only
-- one, and only if the partner's unknown_employee is create; any other
-- insert is checked as before and a reference without a mapping raises.
-- BENCHMARKS.md (issue 15, session 20).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_check_insert() RETURNS trigger
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
    onboard text := nullif(current_setting('payintake.onboard', true), '');
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
    ELSIF onboard IS NOT NULL AND partner_ids = ARRAY[onboard]
        AND (SELECT p.unknown_employee FROM partners p WHERE p.id = onboard) = 'create' THEN
        -- A first file read once (records/direct.go) opted in for its
        -- partner, which creates mappings: the references without one are
        -- onboarded here, under their derived ids, in the order onboarding
        -- inserts them, instead of by a statement before the records (for
        -- which the file had to be read once more). Every reference is
        -- then mapped, or the INSERT raised (a mapping stored meanwhile, a
        -- derived id taken).
        IF cardinality(refs) <= probe_max THEN
            INSERT INTO employees (partner_id, employee_ref, employee_id, source)
            SELECT onboard, n.employee_ref, derived_employee_id(onboard, n.employee_ref), 'derived'
            FROM unnest(refs) n(employee_ref)
            LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
                WHERE e.partner_id = onboard AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
            WHERE m.mapped IS NULL
            ORDER BY n.employee_ref COLLATE "C";
        ELSE
            EXECUTE 'INSERT INTO employees (partner_id, employee_ref, employee_id, source)
                SELECT $1, n.employee_ref, derived_employee_id($1, n.employee_ref), ''derived''
                FROM unnest($2) n(employee_ref)
                WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = $1 AND e.employee_ref = n.employee_ref)
                ORDER BY n.employee_ref COLLATE "C"' USING onboard, refs;
        END IF;
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_check_insert() RETURNS trigger
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
