-- +goose Up

-- Result notifications (package notify): when a submission's result, a leg
-- replay's result or a review report is ready, a Standard Webhooks–signed
-- event is POSTed to the partner's notify URL.

-- Where a partner's events go; NULL: the partner gets none.
ALTER TABLE partners ADD COLUMN notify_url text CHECK (notify_url ~ '^https?://[^\s]+$');

-- One row per business event: the outbox of the notifications. It is written
-- by the triggers below in the very transaction that makes the result or the
-- report durable, so one cannot commit without the other. (event_type,
-- subject) is the business event (subject: the envelope id for
-- submission.processed and review.completed, the replay id for
-- replay.processed); its uniqueness means a repeat never creates a second
-- event. webhook_id is derived from it and is sent unchanged on every attempt;
-- payload is the exact body, built once, so every attempt sends the same bytes.
--   state           pending (due at next_attempt_at), delivered, failed (retries
--                   exhausted, or an answer that is not retried; `notify redeliver`)
--   attempts        every attempt ever made; round_attempts: since the event was
--                   created or last redelivered (the retry budget counts these)
--   next_attempt_at when a pending event is due; a claimed attempt pushes it past
--                   its timeout, so an attempt cut off by a crash is made again
CREATE TABLE notify_events (
    id              bigserial PRIMARY KEY,
    partner_id      text NOT NULL REFERENCES partners (id),
    event_type      text NOT NULL CHECK (event_type IN ('submission.processed', 'replay.processed', 'review.completed')),
    subject         bigint NOT NULL,
    webhook_id      text NOT NULL UNIQUE,
    payload         text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    round_attempts  integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    UNIQUE (event_type, subject)
);
CREATE INDEX notify_events_due ON notify_events (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX notify_events_partner ON notify_events (partner_id, id);

-- The delivery log: one row per attempt (started when claimed; finished_at,
-- status and error once answered; a row never finished is an attempt cut off
-- by a crash).
CREATE TABLE notify_attempts (
    event_id    bigint NOT NULL REFERENCES notify_events (id),
    attempt     integer NOT NULL CHECK (attempt >= 1),
    url         text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    status      integer,
    error       text NOT NULL DEFAULT '',
    PRIMARY KEY (event_id, attempt)
);

-- Who sent an event again, and when (`notify redeliver`).
CREATE TABLE notify_redeliveries (
    id       bigserial PRIMARY KEY,
    event_id bigint NOT NULL REFERENCES notify_events (id),
    by_whom  text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
-- notify_enqueue writes the event (type t, subject s) of partner p with data
-- d, if the partner has a notify URL; a second call for the same event does
-- nothing. The body is {"type", "timestamp", "data"} (the Standard Webhooks
-- payload structure) with its keys in that order.
CREATE FUNCTION notify_enqueue(p text, t text, s bigint, d json) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT notify_url FROM partners WHERE id = p) IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO notify_events (partner_id, event_type, subject, webhook_id, payload)
    VALUES (p, t, s, 'msg_' || t || '_' || s,
        json_build_object('type', t, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', d)::text)
    ON CONFLICT (event_type, subject) DO NOTHING;
END
$$;

-- An envelope that gets its result (processed, or key_reuse: a different
-- file under a used name, rejected) is a submission.processed. A repeat of
-- the same file is a "replay" envelope sharing the first one's result: no
-- event of its own.
CREATE FUNCTION notify_on_envelope() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'submission.processed', NEW.id, json_build_object(
        'submission_id', NEW.id, 'name', NEW.file_name, 'source', NEW.source, 'status', NEW.status,
        'counts', coalesce(NEW.counts, '{}'::jsonb),
        'submission_url', '/v1/submissions/' || NEW.id,
        'result_url', '/v1/submissions/' || NEW.id || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.id || '/rows'));
    RETURN NULL;
END
$$;

-- A leg replay's result is stored by the UPDATE that fills its counts and
-- result file (in the replay's transaction).
CREATE FUNCTION notify_on_replay() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'replay.processed', NEW.id, json_build_object(
        'replay_id', NEW.id, 'submission_id', NEW.of_envelope, 'source', NEW.source, 'counts', NEW.counts,
        'submission_url', '/v1/submissions/' || NEW.of_envelope,
        'result_url', '/v1/submissions/' || NEW.of_envelope || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.of_envelope || '/rows'));
    RETURN NULL;
END
$$;

-- A review report is written when the last open exception of a submission
-- closes (exceptions_review_report, in the decision's transaction).
CREATE FUNCTION notify_on_review() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e envelopes;
BEGIN
    SELECT * INTO e FROM envelopes WHERE id = NEW.envelope_id;
    PERFORM notify_enqueue(e.partner_id, 'review.completed', e.id, json_build_object(
        'submission_id', e.id, 'name', e.file_name,
        'counts', (SELECT json_build_object(
            'approved', count(*) FILTER (WHERE status = 'approved'),
            'rejected', count(*) FILTER (WHERE status = 'rejected'),
            'superseded', count(*) FILTER (WHERE status = 'superseded'))
            FROM exceptions WHERE envelope_id = e.id),
        'submission_url', '/v1/submissions/' || e.id,
        'report_url', '/v1/submissions/' || e.id || '/review.csv'));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER envelopes_notify AFTER UPDATE OF status ON envelopes
    FOR EACH ROW WHEN (OLD.status = 'received' AND NEW.status IN ('processed', 'key_reuse'))
    EXECUTE FUNCTION notify_on_envelope();
CREATE TRIGGER replays_notify AFTER UPDATE OF result ON replays
    FOR EACH ROW WHEN (OLD.result = '' AND NEW.result <> '')
    EXECUTE FUNCTION notify_on_replay();
CREATE TRIGGER envelope_reviews_notify AFTER INSERT ON envelope_reviews
    FOR EACH ROW EXECUTE FUNCTION notify_on_review();

-- +goose Down
DROP TRIGGER envelope_reviews_notify ON envelope_reviews;
DROP TRIGGER replays_notify ON replays;
DROP TRIGGER envelopes_notify ON envelopes;
DROP FUNCTION notify_on_review();
DROP FUNCTION notify_on_replay();
DROP FUNCTION notify_on_envelope();
DROP FUNCTION notify_enqueue(text, text, bigint, json);
DROP TABLE notify_redeliveries, notify_attempts, notify_events;
ALTER TABLE partners DROP COLUMN notify_url;
