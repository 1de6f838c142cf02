-- +goose Up

-- The time a client set on a received SFTP file lives beside the envelope,
-- not in its row: an UPDATE of the envelope row takes the row lock that
-- processing uses as its lease, so a setstat at the moment a worker claimed
-- the envelope made the worker think another process had it.
CREATE TABLE envelope_client_times (
    envelope_id  bigint PRIMARY KEY REFERENCES envelopes (id),
    client_mtime timestamptz NOT NULL
);
INSERT INTO envelope_client_times (envelope_id, client_mtime)
    SELECT id, client_mtime FROM envelopes WHERE client_mtime IS NOT NULL;
ALTER TABLE envelopes DROP COLUMN client_mtime;

-- +goose Down
ALTER TABLE envelopes ADD COLUMN client_mtime timestamptz;
UPDATE envelopes e SET client_mtime = t.client_mtime FROM envelope_client_times t WHERE t.envelope_id = e.id;
DROP TABLE envelope_client_times;
