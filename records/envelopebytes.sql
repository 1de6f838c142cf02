-- name: EnvelopeChunks
SELECT n, data FROM envelope_chunks WHERE envelope_id = $1 ORDER BY n;

-- name: EnvelopeChunksFrom
SELECT n, data FROM envelope_chunks WHERE envelope_id = $1 AND n >= $2 ORDER BY n LIMIT $3;

-- name: EnvelopeStoredSize
-- The bytes an envelope's chunks hold: its size, but none for the statuses
-- in $2, which keep no bytes of their own (a repeat's are its first
-- envelope's; an incomplete upload's were never received whole).
SELECT CASE WHEN status = ANY($2) THEN 0 ELSE size END FROM envelopes WHERE id = $1;
