-- +goose Up

-- The ledger's index on (record_id, version) was read only when a run
-- opens, to leave out versions a previous run settled, and written for
-- every line a run sends: one more index entry a line in the ledger's COPY
-- (~20% of its time, ~10% of the WAL a line). A version settled by a
-- previous run of the period is found as well through that run's due line,
-- which is settled in the same transaction as its ledger row (or, for a key
-- another run settled, takes the ledger's state): the period's few previous
-- runs, probed by the due lines' unique index (run_id, record_id, version).
-- Run 1 has no previous run and probes nothing: the probe must not reach
-- the due lines the same statement is adding (planned while the table was
-- small, a probe by sequential scan re-read them for every record: hours
-- at 100,000 lines).
-- A conflict (a key holding another line) is not settled: such a version is
-- due again and found a conflict again, as before. The archive keeps its
-- index (written once a day).
DROP INDEX dispatch_ledger_record;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dispatch_open_run(p text, pp text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    tgt text;
    gen integer;
    rid bigint;
    n integer;
    prior bigint[];
BEGIN
    SELECT dispatch_target INTO tgt FROM partners WHERE id = p;
    IF tgt IS NULL OR NOT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = p AND pay_period = pp AND reason = 'approved') THEN
        RETURN NULL;
    END IF;
    gen := dispatch_generation(p, pp);
    INSERT INTO dispatch_runs (partner_id, pay_period, run, target) VALUES (p, pp, gen, tgt)
        ON CONFLICT (partner_id, pay_period, run) DO NOTHING RETURNING id INTO rid;
    IF rid IS NULL THEN
        RETURN (SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND run = gen);
    END IF;
    prior := ARRAY(SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND id <> rid);
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, r.id, r.version, coalesce(e.employee_id, derived_employee_id(r.partner_id, r.employee_ref)), r.employee_ref,
        r.component, r.amount::text, r.currency, r.hours::text, r.rate::text, to_char(r.pay_date, 'YYYY-MM-DD')
    FROM records r LEFT JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
    WHERE r.partner_id = p AND r.pay_period = pp
      AND (cardinality(prior) = 0 OR NOT EXISTS (SELECT 1 FROM dispatch_due d
               WHERE d.run_id = ANY (prior) AND d.record_id = r.id AND d.version = r.version AND d.state IN ('succeeded', 'failed')))
      AND NOT EXISTS (SELECT 1 FROM dispatch_ledger_archive l WHERE l.record_id = r.id AND l.version = r.version)
    ORDER BY r.employee_ref, r.component;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE dispatch_runs SET total = n, state = CASE WHEN n = 0 THEN 'complete' ELSE 'in_progress' END,
        completed_at = CASE WHEN n = 0 THEN now() END
    WHERE id = rid;
    RETURN rid;
END
$$;
-- +goose StatementEnd

-- +goose Down
CREATE INDEX dispatch_ledger_record ON dispatch_ledger (record_id, version);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dispatch_open_run(p text, pp text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    tgt text;
    gen integer;
    rid bigint;
    n integer;
BEGIN
    SELECT dispatch_target INTO tgt FROM partners WHERE id = p;
    IF tgt IS NULL OR NOT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = p AND pay_period = pp AND reason = 'approved') THEN
        RETURN NULL;
    END IF;
    gen := dispatch_generation(p, pp);
    INSERT INTO dispatch_runs (partner_id, pay_period, run, target) VALUES (p, pp, gen, tgt)
        ON CONFLICT (partner_id, pay_period, run) DO NOTHING RETURNING id INTO rid;
    IF rid IS NULL THEN
        RETURN (SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND run = gen);
    END IF;
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, r.id, r.version, coalesce(e.employee_id, derived_employee_id(r.partner_id, r.employee_ref)), r.employee_ref,
        r.component, r.amount::text, r.currency, r.hours::text, r.rate::text, to_char(r.pay_date, 'YYYY-MM-DD')
    FROM records r LEFT JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
    WHERE r.partner_id = p AND r.pay_period = pp
      AND NOT EXISTS (SELECT 1 FROM dispatch_ledger l WHERE l.record_id = r.id AND l.version = r.version AND l.state <> 'pending')
      AND NOT EXISTS (SELECT 1 FROM dispatch_ledger_archive l WHERE l.record_id = r.id AND l.version = r.version)
    ORDER BY r.employee_ref, r.component;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE dispatch_runs SET total = n, state = CASE WHEN n = 0 THEN 'complete' ELSE 'in_progress' END,
        completed_at = CASE WHEN n = 0 THEN now() END
    WHERE id = rid;
    RETURN rid;
END
$$;
-- +goose StatementEnd
