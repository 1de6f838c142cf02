-- +goose Up

-- Leg replays: corrected rows of a submission sent again one by one
-- (POST /v1/submissions/{id}/replays). A replay is claimed once per
-- (partner, submission, Idempotency-Key); its body, answer and result are
-- kept for audit and replayed verbatim to a repeat of the request.
CREATE TABLE replays (
    id              bigserial PRIMARY KEY,
    partner_id      text NOT NULL REFERENCES partners (id),
    of_envelope     bigint NOT NULL REFERENCES envelopes (id),
    idem_key        text NOT NULL,
    source          text NOT NULL,
    body_sha256     bytea NOT NULL CHECK (length(body_sha256) = 32),
    body            bytea NOT NULL,
    counts          jsonb NOT NULL,
    result          bytea NOT NULL,
    response_status integer NOT NULL,
    response_body   bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partner_id, of_envelope, idem_key)
);

-- One row per leg (a row of a submission) ever replayed, keyed by its leg
-- key HMAC-SHA256(submission key, row index): the latest outcome and the
-- replay that produced it. A settled leg (any outcome but rejected) is
-- never applied again: the upsert that claims a leg for a replay does
-- nothing on a settled one, so the key's uniqueness decides, not Go.
CREATE TABLE replay_legs (
    partner_id  text NOT NULL REFERENCES partners (id),
    leg_key     bytea NOT NULL CHECK (length(leg_key) = 32),
    of_envelope bigint NOT NULL REFERENCES envelopes (id),
    row_no      integer NOT NULL CHECK (row_no > 0),
    replay_id   bigint NOT NULL REFERENCES replays (id),
    outcome     text,
    code        text,
    result_line text,
    settled     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (partner_id, leg_key),
    UNIQUE (of_envelope, row_no),
    CHECK (NOT settled OR (outcome IS NOT NULL AND outcome <> 'rejected'))
);

-- +goose Down
DROP TABLE replay_legs, replays;
