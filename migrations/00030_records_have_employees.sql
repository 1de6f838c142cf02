-- +goose Up

-- Every record's employee_ref has a mapping, so whoever reads records (the
-- dispatcher, the API) can always join them to employees for employee_id.
-- Records written between 00008 and the code that keeps the mapping get the
-- derived one first, exactly as --unknown-employee create would have given.
INSERT INTO employees (partner_id, employee_ref, employee_id, source)
SELECT DISTINCT partner_id, employee_ref, derived_employee_id(partner_id, employee_ref), 'derived'
FROM records
ON CONFLICT DO NOTHING;

ALTER TABLE records ADD CONSTRAINT records_employee_fkey
    FOREIGN KEY (partner_id, employee_ref) REFERENCES employees (partner_id, employee_ref);

-- +goose Down
ALTER TABLE records DROP CONSTRAINT records_employee_fkey;
