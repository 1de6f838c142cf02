-- +goose Up

-- employees' reference to partners is checked once per statement instead of
-- once per row, as records' references are since 00005. Onboarding a first
-- file's unknown employees (--unknown-employee create) inserts one mapping
-- per reference in one statement, and the foreign key ran one lookup and one
-- row lock on the partner for each: 182,062 of them for the bench's
-- 1,000,000-row file, ~40% of the whole insert (EXPLAIN ANALYZE: "Trigger
-- for constraint employees_partner_id_fkey: time=4251 calls=182062").
--
-- The same guarantees, set based: after every INSERT on employees one
-- statement-level trigger checks the new rows' distinct partner_id (usually
-- one) and takes the FOR KEY SHARE lock a foreign key takes, so the partner
-- cannot be deleted while the inserting transaction is open. A mapping's
-- partner_id never changes (employees_immutable, 00008, refuses any update
-- of it), so no UPDATE can break the reference. On the referenced side,
-- deleting a partner that still has mappings, or changing its id, is
-- refused as the NO ACTION foreign key did (nothing in payintake does
-- either).
ALTER TABLE employees DROP CONSTRAINT employees_partner_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION employees_check_partner() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    partner_ids text[];
    n bigint;
    bad text;
BEGIN
    SELECT array_agg(k.partner_id) INTO partner_ids
    FROM (SELECT partner_id FROM new_rows GROUP BY partner_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert on table "employees" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION employees_referenced_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM employees WHERE partner_id = OLD.id) THEN
        RAISE EXCEPTION 'update or delete on table "partners" violates the reference from table "employees"'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (id)=(%s) is still referenced from table "employees".', OLD.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER employees_partner_insert AFTER INSERT ON employees
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION employees_check_partner();
CREATE TRIGGER partners_referenced_by_employees AFTER UPDATE OF id OR DELETE ON partners
    FOR EACH ROW EXECUTE FUNCTION employees_referenced_guard();

-- +goose Down
DROP TRIGGER partners_referenced_by_employees ON partners;
DROP TRIGGER employees_partner_insert ON employees;
DROP FUNCTION employees_referenced_guard();
DROP FUNCTION employees_check_partner();
ALTER TABLE employees ADD FOREIGN KEY (partner_id) REFERENCES partners (id);
