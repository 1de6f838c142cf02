-- name: InsertEnvelope
INSERT INTO envelopes (partner_id, file_name, submission_key, sha256, size, source, status, received_at)
VALUES ($1, $2, $3, $4, $5, $6, 'received', clock_timestamp())
RETURNING id, received_at;

-- name: ReserveEnvelopeID
-- A streamed file's envelope id, taken when its upload starts: its chunks
-- are copied under it while the upload arrives, and the envelope row
-- (InsertStreamedEnvelope) goes in at the close, in the same transaction.
-- No other transaction can be given this id, so none can write or delete
-- an envelope the chunks would then belong to.
SELECT nextval(pg_get_serial_sequence('envelopes', 'id'));

-- name: InsertStreamedEnvelope
INSERT INTO envelopes (id, partner_id, file_name, submission_key, sha256, size, source, status, received_at)
VALUES ($7, $1, $2, $3, $4, $5, $6, 'received', clock_timestamp())
RETURNING id, received_at;

-- name: InsertEnvelopeClientTime
INSERT INTO envelope_client_times (envelope_id, client_mtime) VALUES ($1, $2);

-- name: ClaimSubmissionKey
INSERT INTO submissions (partner_id, submission_key, envelope_id, sha256)
VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING true;

-- name: FirstOfSubmissionKey
-- The first envelope of a key: what its key was claimed with (its
-- identity, the plaintext's hash for OpenPGP) and the hash of its bytes.
SELECT s.envelope_id, s.sha256, e.sha256 FROM submissions s JOIN envelopes e ON e.id = s.envelope_id
WHERE s.partner_id = $1 AND s.submission_key = $2;

-- name: MarkRepeat
UPDATE envelopes SET status = 'replay', replay_of = $2, processed_at = clock_timestamp() WHERE id = $1;

-- name: DropRepeatChunks
DELETE FROM envelope_chunks WHERE envelope_id = $1;

-- name: MarkIncomplete
INSERT INTO envelopes (partner_id, file_name, submission_key, sha256, size, source, status, processed_at)
VALUES ($1, $2, $3, $4, $5, $6, 'incomplete', now());

-- name: Envelope
SELECT {{envelope_columns}} FROM envelopes WHERE id = $1;

-- name: Submissions
SELECT {{envelope_columns}} FROM envelopes
WHERE partner_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR lower(file_name) = lower($3))
	AND ($4 = 0 OR id < $4)
ORDER BY id DESC LIMIT $5;

