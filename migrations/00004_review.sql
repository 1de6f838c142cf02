-- +goose Up

-- Reviewers: the people who decide held exceptions (CLI `reviewer add`).
-- password_hash is an argon2id PHC string ($argon2id$v=19$m=...,t=...,p=...$salt$hash).
-- partners empty means the reviewer may decide for every partner; otherwise only these.
CREATE TABLE reviewers (
    name          text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'),
    password_hash text NOT NULL,
    partners      text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);

-- Logged-in reviewers: console sessions (cookie) and API bearer tokens.
-- Only a SHA-256 of the token is kept. csrf_token is checked on every console POST.
CREATE TABLE reviewer_sessions (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    reviewer   text NOT NULL REFERENCES reviewers (name),
    kind       text NOT NULL CHECK (kind IN ('console', 'api')),
    csrf_token text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX reviewer_sessions_expiry ON reviewer_sessions (expires_at);

-- What reviewers did and tried: decisions (written in the same transaction as
-- their effect), logins, refusals. via: cli, api or console.
CREATE TABLE review_audit (
    id           bigserial PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,
    via          text NOT NULL CHECK (via IN ('cli', 'api', 'console')),
    action       text NOT NULL,
    exception_id bigint REFERENCES exceptions (id),
    partner_id   text,
    detail       text NOT NULL DEFAULT ''
);
CREATE INDEX review_audit_exception ON review_audit (exception_id);

-- Every lock and unlock of a period, with who, when and why. Locks are
-- recorded by a trigger on period_locks (however they are made); unlocks by
-- records.UnlockPeriod, which must give a reason.
CREATE TABLE lock_events (
    id         bigserial PRIMARY KEY,
    partner_id text NOT NULL REFERENCES partners (id),
    pay_period text NOT NULL,
    action     text NOT NULL CHECK (action IN ('lock', 'unlock')),
    reason     text NOT NULL,
    by         text NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    records    bigint
);
CREATE INDEX lock_events_period ON lock_events (partner_id, pay_period, id);

-- +goose StatementBegin
CREATE FUNCTION period_locks_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lock_events (partner_id, pay_period, action, reason, by, at)
    VALUES (NEW.partner_id, NEW.pay_period, 'lock', NEW.reason, NEW.locked_by, NEW.locked_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER period_locks_event AFTER INSERT OR UPDATE ON period_locks
    FOR EACH ROW EXECUTE FUNCTION period_locks_event();

-- The review report of a submission: what reviewers decided about its held
-- rows, as the CSV bytes the partner downloads as NAME.review.csv. Written once,
-- in the transaction that closes the envelope's last open exception.
CREATE TABLE envelope_reviews (
    envelope_id bigint PRIMARY KEY REFERENCES envelopes (id),
    data        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- csv_safe keeps a spreadsheet from running a value as a formula, as the
-- result file does: a value starting with = + - @ tab or CR that is not a
-- number gets a leading '.
-- +goose StatementBegin
CREATE FUNCTION csv_safe(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ E'^[=+\\-@\t\r]' AND v !~ '^[+-]?[0-9]+(\.[0-9]+)?$' THEN '''' || v
        ELSE v
    END
$$;
-- +goose StatementEnd

-- review_report_csv builds the review report of an envelope: the result file's
-- header, then one row per exception of the envelope in line order. Outcome
-- approved (code empty), or rejected with code rejected_by_reviewer, or — for
-- a change replaced by a later file's different change before anyone decided —
-- rejected with code superseded. The reviewer's note is part of the message.
-- +goose StatementBegin
CREATE FUNCTION review_report_csv(env bigint) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT convert_to('line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message' || E'\n' ||
        coalesce(string_agg(concat_ws(',',
            coalesce(x.line, 0), coalesce(x.row_no, 0),
            CASE x.status WHEN 'approved' THEN 'approved' ELSE 'rejected' END,
            csv_field(csv_safe(x.employee_ref)), csv_field(csv_safe(x.pay_period)), csv_field(csv_safe(x.component)),
            csv_field(x.proposed ->> 'amount'), csv_field(x.proposed ->> 'currency'),
            CASE x.status WHEN 'approved' THEN '' WHEN 'rejected' THEN 'rejected_by_reviewer' ELSE 'superseded' END,
            '',
            csv_field(csv_safe(CASE x.status
                WHEN 'approved' THEN 'a reviewer approved this change and it was applied; the record stays locked'
                WHEN 'rejected' THEN 'a reviewer rejected this change, so the record keeps its locked values'
                ELSE 'this change was not applied: a later file proposed a different change for the same record, which is reviewed instead'
            END || CASE WHEN coalesce(x.note, '') <> '' AND x.status <> 'superseded'
                THEN '; reviewer''s note: ' || x.note ELSE '' END))
        ) || E'\n', '' ORDER BY x.line, x.id), ''), 'UTF8')
    FROM exceptions x WHERE x.envelope_id = env
$$;
-- +goose StatementEnd

-- When a statement closes the last open exception of an envelope (a decision,
-- or a supersession while a later file is applied), the envelope's review
-- report is written in that same transaction.
-- +goose StatementBegin
CREATE FUNCTION exceptions_review_report() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO envelope_reviews (envelope_id, data)
    SELECT c.envelope_id, review_report_csv(c.envelope_id)
    FROM (SELECT DISTINCT envelope_id FROM changed WHERE envelope_id IS NOT NULL AND status <> 'open') c
    WHERE NOT EXISTS (SELECT 1 FROM exceptions x WHERE x.envelope_id = c.envelope_id AND x.status = 'open')
    ON CONFLICT (envelope_id) DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER exceptions_review_report AFTER UPDATE ON exceptions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION exceptions_review_report();

-- +goose Down
DROP TRIGGER exceptions_review_report ON exceptions;
DROP FUNCTION exceptions_review_report();
DROP FUNCTION review_report_csv(bigint);
DROP FUNCTION csv_safe(text);
DROP TABLE envelope_reviews;
DROP TRIGGER period_locks_event ON period_locks;
DROP FUNCTION period_locks_event();
DROP TABLE lock_events, review_audit, reviewer_sessions, reviewers;
