-- +goose Up

-- A partner is one sender of payroll files: an employer, an EOR provider, an HR system.
CREATE TABLE partners (
    id            text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    name          text NOT NULL DEFAULT '',
    delimiter     text NOT NULL DEFAULT '' CHECK (delimiter IN ('', ',', ';', '|', E'\t')),
    decimal_comma boolean NOT NULL DEFAULT false,
    date_format   text NOT NULL DEFAULT '',
    currency      text NOT NULL DEFAULT '' CHECK (currency = '' OR currency ~ '^[A-Z]{3}$'),
    file_pattern  text NOT NULL DEFAULT '',
    mode          text NOT NULL DEFAULT 'row' CHECK (mode IN ('row', 'all-or-nothing')),
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- SSH public keys a partner may log in with; several at once so keys rotate without downtime.
CREATE TABLE partner_keys (
    id          bigserial PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (id),
    fingerprint text NOT NULL,
    public_key  text NOT NULL,
    comment     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    UNIQUE (partner_id, fingerprint)
);

-- Every file that arrived, whatever became of it: the audit trail of what was sent.
--   received    bytes stored, waiting to be processed
--   processed   rows applied (or the file rejected as a whole); row_results hold the outcome
--   replay      same key and same bytes as an earlier envelope: its result is replay_of's
--   key_reuse   same key, different bytes: rejected loudly, nothing applied
--   incomplete  the upload was cut off before a clean close: never processed
CREATE TABLE envelopes (
    id             bigserial PRIMARY KEY,
    partner_id     text NOT NULL REFERENCES partners (id),
    file_name      text NOT NULL,
    submission_key text NOT NULL,
    sha256         bytea NOT NULL CHECK (length(sha256) = 32),
    size           bigint NOT NULL CHECK (size >= 0),
    source         text NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    status         text NOT NULL CHECK (status IN ('received', 'processed', 'replay', 'key_reuse', 'incomplete')),
    replay_of      bigint REFERENCES envelopes (id),
    seq            bigint,
    counts         jsonb,
    result_size    bigint,
    processed_at   timestamptz,
    CHECK ((status = 'replay') = (replay_of IS NOT NULL))
);
CREATE INDEX envelopes_partner_name ON envelopes (partner_id, lower(file_name), id);
CREATE INDEX envelopes_received ON envelopes (id) WHERE status = 'received';

-- The submission key, claimed once. The primary key is what makes a concurrent
-- second upload of the same file wait for, and then see, the first.
CREATE TABLE submissions (
    partner_id     text NOT NULL REFERENCES partners (id),
    submission_key text NOT NULL,
    envelope_id    bigint NOT NULL UNIQUE REFERENCES envelopes (id),
    sha256         bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partner_id, submission_key)
);

-- The original bytes of an envelope, in order, 1 MiB a chunk (streamed, never held whole).
CREATE TABLE envelope_chunks (
    envelope_id bigint NOT NULL REFERENCES envelopes (id),
    n           integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (envelope_id, n)
);

-- The current version of every business fact. The natural key is unique here,
-- not in application code.
CREATE TABLE records (
    id            bigserial PRIMARY KEY,
    partner_id    text NOT NULL REFERENCES partners (id),
    employee_ref  text NOT NULL,
    pay_period    text NOT NULL,
    component     text NOT NULL,
    amount        numeric NOT NULL,
    currency      text NOT NULL,
    hours         numeric,
    rate          numeric,
    pay_date      date,
    content_hash  bytea NOT NULL,
    version       integer NOT NULL DEFAULT 1,
    last_seq      bigint,
    locked_reason text CHECK (locked_reason IN ('approved', 'paid')),
    locked_at     timestamptz,
    envelope_id   bigint REFERENCES envelopes (id),
    line          integer,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partner_id, employee_ref, pay_period, component)
);
CREATE INDEX records_period ON records (partner_id, pay_period);

-- Every version a record had before it was replaced, with what replaced it.
CREATE TABLE record_history (
    record_id     bigint NOT NULL REFERENCES records (id),
    version       integer NOT NULL,
    amount        numeric NOT NULL,
    currency      text NOT NULL,
    hours         numeric,
    rate          numeric,
    pay_date      date,
    content_hash  bytea NOT NULL,
    envelope_id   bigint REFERENCES envelopes (id),
    line          integer,
    written_at    timestamptz NOT NULL,
    replaced_at   timestamptz NOT NULL DEFAULT now(),
    replaced_by   text NOT NULL,
    PRIMARY KEY (record_id, version)
);

-- A closed period: its records are locked and it takes no new natural keys.
CREATE TABLE period_locks (
    partner_id text NOT NULL REFERENCES partners (id),
    pay_period text NOT NULL,
    reason     text NOT NULL CHECK (reason IN ('approved', 'paid')),
    locked_by  text NOT NULL,
    locked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partner_id, pay_period)
);

-- A change that met a locked record or a closed period, held for a human.
CREATE TABLE exceptions (
    id            bigserial PRIMARY KEY,
    partner_id    text NOT NULL REFERENCES partners (id),
    employee_ref  text NOT NULL,
    pay_period    text NOT NULL,
    component     text NOT NULL,
    record_id     bigint REFERENCES records (id),
    code          text NOT NULL CHECK (code IN ('record_locked', 'period_locked')),
    current       jsonb,
    proposed      jsonb NOT NULL,
    proposed_hash bytea NOT NULL,
    differing     text[] NOT NULL,
    envelope_id   bigint REFERENCES envelopes (id),
    line          integer,
    row_no        integer,
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'approved', 'rejected', 'superseded')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_by    text,
    decided_at    timestamptz,
    note          text,
    superseded_by bigint REFERENCES exceptions (id)
);
CREATE UNIQUE INDEX exceptions_one_open ON exceptions (partner_id, employee_ref, pay_period, component) WHERE status = 'open';
CREATE INDEX exceptions_status ON exceptions (status, partner_id, id);
CREATE INDEX exceptions_envelope ON exceptions (envelope_id);

-- The result file of each processed envelope, as the bytes the partner downloads,
-- built in SQL from the staged rows in the same transaction as the records.
-- Chunk -1 is the header. A replay serves these bytes again, byte for byte.
CREATE TABLE envelope_results (
    envelope_id bigint NOT NULL REFERENCES envelopes (id),
    n           integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (envelope_id, n)
);

-- csv_field quotes one CSV cell when it needs quoting (RFC 4180).
-- +goose StatementBegin
CREATE FUNCTION csv_field(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v IS NULL THEN ''
        WHEN v ~ E'[",\r\n]' OR v ~ '^\s' OR v ~ '\s$' THEN '"' || replace(v, '"', '""') || '"'
        ELSE v
    END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION csv_field(text);
DROP TABLE envelope_results, exceptions, period_locks, record_history, records,
    envelope_chunks, submissions, envelopes, partner_keys, partners;
