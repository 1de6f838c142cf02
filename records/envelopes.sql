-- name: InsertEnvelope
INSERT INTO envelopes (partner_id, file_name, submission_key, sha256, size, source, status, received_at)
VALUES ($1, $2, $3, $4, $5, $6, 'received', clock_timestamp())
RETURNING id, received_at;

-- name: InsertStreamedEnvelope
-- A streamed file's envelope row goes in first, a stub that nobody sees
-- before CompleteStreamedEnvelope fills it in the same transaction: the
-- chunks' references to it are then checked when the stream's COPY ends
-- (an AFTER row trigger fires at the end of its statement), not deferred
-- to the commit, where the 8,000 checks of a 60 MB file made the close
-- 0.2 s longer. Copying in several statements checks them earlier, while
-- the upload arrives, but PostgreSQL is the slower side of a stream: the
-- checks then only delay the copy, and each statement's round trip adds.
INSERT INTO envelopes (id, partner_id, file_name, submission_key, sha256, size, source, status)
VALUES (nextval(pg_get_serial_sequence('envelopes', 'id')), $1, '', '', decode(repeat('00', 32), 'hex'), 0, '', 'received')
RETURNING id;

-- name: CompleteStreamedEnvelope
UPDATE envelopes SET file_name = $2, submission_key = $3, sha256 = $4, size = $5, source = $6, received_at = clock_timestamp()
WHERE id = $7 AND partner_id = $1 AND status = 'received'
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

