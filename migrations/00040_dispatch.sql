-- +goose Up

-- Outbound dispatch to the payroll vendor (SPEC "Outbound dispatch"; package dispatch).

-- A payroll vendor's batch API. The bearer token is not kept here: token_file
-- names a file (readable by the serving process) whose first line is the
-- token, read at each run, so the token can be rotated by replacing the file
-- and never lands in the database or its backups. rate_limit 0: no limit.
CREATE TABLE dispatch_targets (
    name          text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    url           text NOT NULL CHECK (url ~ '^https?://'),
    token_file    text NOT NULL DEFAULT '',
    rate_limit    numeric NOT NULL DEFAULT 10 CHECK (rate_limit >= 0),
    chunk_size    integer NOT NULL CHECK (chunk_size BETWEEN 1 AND 10000),
    max_attempts  integer NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 100),
    retry_base_ms bigint NOT NULL DEFAULT 2000 CHECK (retry_base_ms >= 0),
    timeout_ms    bigint NOT NULL DEFAULT 10000 CHECK (timeout_ms > 0),
    line_status   boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE partners ADD COLUMN dispatch_target text REFERENCES dispatch_targets (name);

-- One run of a locked period: its resume record. run counts from 1 and goes
-- up only when the period is unlocked and locked again (the number of unlock
-- events + 1); the batch key is derived from (partner, period, run) in Go
-- (dispatch.BatchKey). The run is the outbox of the dispatch work: it is
-- written by the triggers below in the transaction of the lock or approval,
-- and serve's sweep queues a River job for every run in_progress.
--   total    lines due in the run; settled: succeeded + dead-lettered
--   cursor   the highest due line id sent and recorded at least once
--   requests requests sent for the run, retries included
CREATE TABLE dispatch_runs (
    id           bigserial PRIMARY KEY,
    partner_id   text NOT NULL REFERENCES partners (id),
    pay_period   text NOT NULL,
    run          integer NOT NULL CHECK (run >= 1),
    target       text NOT NULL REFERENCES dispatch_targets (name),
    state        text NOT NULL DEFAULT 'in_progress' CHECK (state IN ('in_progress', 'complete')),
    total        integer NOT NULL DEFAULT 0,
    settled      integer NOT NULL DEFAULT 0,
    cursor       bigint NOT NULL DEFAULT 0,
    requests     bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    UNIQUE (partner_id, pay_period, run)
);
CREATE INDEX dispatch_runs_open ON dispatch_runs (id) WHERE state = 'in_progress';

-- The lines due in a run: one record version each, with its values as they
-- were when it became due. key is filled when the dispatcher first takes the
-- line (the key rule lives in Go only). state: pending, succeeded, failed
-- (dead letter), conflict (its key already holds another request hash: never
-- sent). round goes up when a line is put back for a later chunk (207).
CREATE TABLE dispatch_due (
    id           bigserial PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES dispatch_runs (id),
    record_id    bigint NOT NULL REFERENCES records (id),
    version      integer NOT NULL,
    employee_id  text NOT NULL,
    employee_ref text NOT NULL,
    component    text NOT NULL,
    amount       text NOT NULL,
    currency     text NOT NULL,
    hours        text,
    rate         text,
    pay_date     text,
    key          text,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed', 'conflict')),
    round        integer NOT NULL DEFAULT 0,
    UNIQUE (run_id, record_id, version)
);
CREATE INDEX dispatch_due_pending ON dispatch_due (run_id, round, id) WHERE state = 'pending';
CREATE INDEX dispatch_due_run ON dispatch_due (run_id, state);

-- The ledger: one durable row per line key, whatever run sent it. request_hash
-- is the SHA-256 of line, the line object exactly as sent; the primary key
-- makes (key, request_hash) unique together, and a line that would go out
-- under an existing key with another hash is recorded in dispatch_conflicts
-- instead of being sent.
CREATE TABLE dispatch_ledger (
    key          text PRIMARY KEY,
    request_hash bytea NOT NULL CHECK (length(request_hash) = 32),
    partner_id   text NOT NULL,
    pay_period   text NOT NULL,
    employee_id  text NOT NULL,
    employee_ref text NOT NULL,
    component    text NOT NULL,
    version      integer NOT NULL,
    record_id    bigint NOT NULL,
    line         bytea NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    last_status  integer,
    last_detail  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    settled_at   timestamptz
);
CREATE INDEX dispatch_ledger_record ON dispatch_ledger (record_id, version);
CREATE INDEX dispatch_ledger_settled ON dispatch_ledger (settled_at) WHERE state <> 'pending';

-- Settled ledger rows older than 90 days, moved here once a day. Still
-- consulted: an archived key is never sent again.
CREATE TABLE dispatch_ledger_archive (LIKE dispatch_ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE dispatch_ledger_archive ADD PRIMARY KEY (key);
ALTER TABLE dispatch_ledger_archive ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX dispatch_ledger_archive_record ON dispatch_ledger_archive (record_id, version);

-- A line that would have been sent under an existing key with another request
-- hash: a bug, never routine. Shown by `dispatch status`.
CREATE TABLE dispatch_conflicts (
    id           bigserial PRIMARY KEY,
    key          text NOT NULL,
    run_id       bigint NOT NULL REFERENCES dispatch_runs (id),
    stored_hash  bytea NOT NULL,
    request_hash bytea NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (key, request_hash, run_id)
);

-- dispatch_generation is the run number a partner's period is at: 1 + how
-- often it was unlocked.
-- +goose StatementBegin
CREATE FUNCTION dispatch_generation(p text, pp text) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT 1 + count(*)::integer FROM lock_events WHERE partner_id = p AND pay_period = pp AND action = 'unlock'
$$;

-- dispatch_open_run opens the run of a partner's period locked with reason
-- approved, if the partner has a target and the run of this lock does not
-- exist yet, with every record of the period due at its current version
-- (except versions a previous run already settled). It returns the run's id,
-- or NULL when nothing is to be dispatched.
CREATE FUNCTION dispatch_open_run(p text, pp text) RETURNS bigint
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

CREATE FUNCTION dispatch_on_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.reason = 'approved' THEN
        PERFORM dispatch_open_run(NEW.partner_id, NEW.pay_period);
    END IF;
    RETURN NULL;
END
$$;

-- A new version of a record in a period whose current lock has a run (an
-- approved exception) is due in that run.
CREATE FUNCTION dispatch_on_version() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    rid bigint;
BEGIN
    SELECT id INTO rid FROM dispatch_runs
    WHERE partner_id = NEW.partner_id AND pay_period = NEW.pay_period AND run = dispatch_generation(NEW.partner_id, NEW.pay_period);
    IF rid IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, NEW.id, NEW.version, coalesce(e.employee_id, derived_employee_id(NEW.partner_id, NEW.employee_ref)), NEW.employee_ref,
        NEW.component, NEW.amount::text, NEW.currency, NEW.hours::text, NEW.rate::text, to_char(NEW.pay_date, 'YYYY-MM-DD')
    FROM (SELECT 1) one LEFT JOIN employees e ON e.partner_id = NEW.partner_id AND e.employee_ref = NEW.employee_ref
    ON CONFLICT (run_id, record_id, version) DO NOTHING;
    IF FOUND THEN
        UPDATE dispatch_runs SET total = total + 1, state = 'in_progress', completed_at = NULL, updated_at = now()
        WHERE id = rid;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER period_locks_dispatch AFTER INSERT OR UPDATE ON period_locks
    FOR EACH ROW EXECUTE FUNCTION dispatch_on_lock();
CREATE TRIGGER records_dispatch_version AFTER UPDATE ON records
    FOR EACH ROW WHEN (NEW.locked_reason IS NOT NULL AND NEW.version <> OLD.version) EXECUTE FUNCTION dispatch_on_version();
CREATE TRIGGER records_dispatch_insert AFTER INSERT ON records
    FOR EACH ROW WHEN (NEW.locked_reason IS NOT NULL) EXECUTE FUNCTION dispatch_on_version();

-- +goose Down
DROP TRIGGER records_dispatch_insert ON records;
DROP TRIGGER records_dispatch_version ON records;
DROP TRIGGER period_locks_dispatch ON period_locks;
DROP FUNCTION dispatch_on_version();
DROP FUNCTION dispatch_on_lock();
DROP FUNCTION dispatch_open_run(text, text);
DROP FUNCTION dispatch_generation(text, text);
DROP TABLE dispatch_conflicts, dispatch_ledger_archive, dispatch_ledger, dispatch_due, dispatch_runs;
ALTER TABLE partners DROP COLUMN dispatch_target;
DROP TABLE dispatch_targets;
