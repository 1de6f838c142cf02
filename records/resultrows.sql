-- name: ResultChunks
SELECT data FROM envelope_results WHERE envelope_id = $1 ORDER BY n;

-- name: ResultChunksFrom
SELECT data FROM envelope_results WHERE envelope_id = $1 AND n >= $2 ORDER BY n;

