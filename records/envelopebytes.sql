-- name: EnvelopeChunks
SELECT n, data FROM envelope_chunks WHERE envelope_id = $1 ORDER BY n;

-- name: EnvelopeChunksFrom
SELECT n, data FROM envelope_chunks WHERE envelope_id = $1 AND n >= $2 ORDER BY n LIMIT $3;
