-- name: SetInboxModTime
INSERT INTO envelope_client_times (envelope_id, client_mtime)
SELECT id, $4 FROM envelopes
WHERE partner_id = $1 AND lower(file_name) = lower($2) AND file_name = $2 AND source = 'sftp'
  AND status <> 'incomplete' AND received_at >= $3
ORDER BY id DESC LIMIT 1
ON CONFLICT (envelope_id) DO UPDATE SET client_mtime = excluded.client_mtime;

-- name: InboxFiles
SELECT {{inbox_columns}} FROM (
	SELECT DISTINCT ON (file_name) * FROM envelopes
	WHERE partner_id = $1 AND source = 'sftp' AND status <> 'incomplete' AND received_at >= $2
	ORDER BY file_name, id DESC) latest
ORDER BY file_name LIMIT $3;

-- name: InboxFile
SELECT {{inbox_columns}} FROM envelopes
WHERE partner_id = $1 AND lower(file_name) = lower($2) AND file_name = $2 AND source = 'sftp'
  AND status <> 'incomplete' AND received_at >= $3
ORDER BY id DESC LIMIT 1;

