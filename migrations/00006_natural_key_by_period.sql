-- +goose Up

-- records' natural key stays unique on the same four columns, with pay_period
-- second: the one index then also serves the lookups by partner and pay period
-- (records lock/unlock, period decisions), so records_period is dropped and a
-- new record maintains two indexes instead of three.
ALTER TABLE records ADD CONSTRAINT records_natural_key UNIQUE (partner_id, pay_period, employee_ref, component);
ALTER TABLE records DROP CONSTRAINT records_partner_id_employee_ref_pay_period_component_key;
DROP INDEX records_period;

-- +goose Down
CREATE INDEX records_period ON records (partner_id, pay_period);
ALTER TABLE records ADD CONSTRAINT records_partner_id_employee_ref_pay_period_component_key UNIQUE (partner_id, employee_ref, pay_period, component);
ALTER TABLE records DROP CONSTRAINT records_natural_key;
