-- +goose Up

-- The mapping kept at onboarding: a partner's employee_ref names one worker,
-- whom the platform (and the payroll vendor) knows by employee_id. A mapping
-- is stored once and never changed by a file: employee_id is unique across
-- partners, and a trigger refuses any update of it.
--   source: import   `payintake employees import`
--           derived  created for an unknown reference (--unknown-employee create,
--                    or an approved unknown_employee exception)
CREATE TABLE employees (
    partner_id   text NOT NULL REFERENCES partners (id),
    employee_ref text NOT NULL,
    employee_id  text NOT NULL UNIQUE CHECK (employee_id ~ '^[^[:cntrl:]]{1,128}$'),
    name         text NOT NULL DEFAULT '',
    source       text NOT NULL CHECK (source IN ('import', 'derived')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partner_id, employee_ref)
);

-- derived_employee_id is the id given to a reference that has no mapping:
-- 'emp_' + the first 20 hex digits of SHA-256 of '{partner}:{employee_ref}'
-- (UTF-8). The same on every replica and every re-run. Go's copy of this rule
-- is checked against this function by a parity test.
-- +goose StatementBegin
CREATE FUNCTION derived_employee_id(partner text, employee_ref text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT 'emp_' || left(encode(sha256(convert_to(partner || ':' || employee_ref, 'UTF8')), 'hex'), 20)
$$;

CREATE FUNCTION employees_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.employee_id IS DISTINCT FROM OLD.employee_id
       OR NEW.partner_id IS DISTINCT FROM OLD.partner_id
       OR NEW.employee_ref IS DISTINCT FROM OLD.employee_ref THEN
        RAISE EXCEPTION 'employee mapping %/% is kept as onboarded and cannot be changed', OLD.partner_id, OLD.employee_ref
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER employees_immutable BEFORE UPDATE ON employees
    FOR EACH ROW EXECUTE FUNCTION employees_immutable();

-- What to do with a row whose employee_ref has no mapping (SPEC "Employees").
ALTER TABLE partners ADD COLUMN unknown_employee text NOT NULL DEFAULT 'create'
    CHECK (unknown_employee IN ('create', 'reject', 'hold'));

-- Records written before this migration get the derived mapping, exactly as
-- the default (create) would have given them.
INSERT INTO employees (partner_id, employee_ref, employee_id, source)
SELECT DISTINCT partner_id, employee_ref, derived_employee_id(partner_id, employee_ref), 'derived'
FROM records
ON CONFLICT DO NOTHING;

-- An unknown employee can be held for a reviewer.
ALTER TABLE exceptions DROP CONSTRAINT exceptions_code_check;
ALTER TABLE exceptions ADD CONSTRAINT exceptions_code_check
    CHECK (code IN ('record_locked', 'period_locked', 'unknown_employee'));

-- +goose Down
ALTER TABLE exceptions DROP CONSTRAINT exceptions_code_check;
ALTER TABLE exceptions ADD CONSTRAINT exceptions_code_check
    CHECK (code IN ('record_locked', 'period_locked'));
ALTER TABLE partners DROP COLUMN unknown_employee;
DROP TABLE employees;
DROP FUNCTION employees_immutable();
DROP FUNCTION derived_employee_id(text, text);
