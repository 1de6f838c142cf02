-- name: EnvelopeChunk
SELECT data FROM envelope_chunks WHERE envelope_id = $1 AND n = $2;

