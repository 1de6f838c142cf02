-- +goose Up

-- What happened to an envelope whose processing did not finish: how often
-- it failed (and the last error), and how often the orphan sweep queued it
-- again. The sweep waits longer after each requeue and stops after a few,
-- so a file that kills or stalls its processor is not retried in a loop;
-- operators see such envelopes in the logs and in
-- payintake_envelopes_stuck.
CREATE TABLE envelope_attempts (
    envelope_id      bigint PRIMARY KEY REFERENCES envelopes (id),
    failures         integer NOT NULL DEFAULT 0,
    last_error       text,
    last_failed_at   timestamptz,
    requeues         integer NOT NULL DEFAULT 0,
    last_requeued_at timestamptz
);

-- +goose Down
DROP TABLE envelope_attempts;
