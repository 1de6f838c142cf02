-- name: LockUploadName
-- Starts and renames to one name wait for each other (class 7311; the
-- partner lock of store.sql is 7310).
SELECT pg_advisory_xact_lock(7311, hashtext($1 || '/' || $2));

-- name: DropUploadNamed
DELETE FROM sftp_uploads WHERE partner_id = $1 AND name = $2;

-- name: CountUploads
SELECT count(*) FROM sftp_uploads WHERE partner_id = $1;

-- name: InsertUpload
INSERT INTO sftp_uploads (partner_id, name, sha256_state, writer, writer_until)
VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
ON CONFLICT (partner_id, name) DO NOTHING
RETURNING {{upload_columns}};

-- name: ClaimUpload
UPDATE sftp_uploads SET writer = $3, writer_until = now() + $4 * interval '1 millisecond', touched = now()
WHERE partner_id = $1 AND name = $2 AND (writer IS NULL OR writer_until < now())
RETURNING {{upload_columns}};

-- name: UploadNamed
SELECT {{upload_columns}} FROM sftp_uploads WHERE partner_id = $1 AND name = $2;

-- name: Uploads
SELECT {{upload_columns}} FROM sftp_uploads WHERE partner_id = $1 ORDER BY name LIMIT $2;

-- name: LockOwnUpload
SELECT size, (SELECT coalesce(max(n) + 1, 0) FROM sftp_upload_chunks WHERE upload_id = $1)
FROM sftp_uploads WHERE id = $1 AND writer = $2 FOR UPDATE;

-- name: SaveUpload
UPDATE sftp_uploads SET size = $2, sha256_state = $3, client_mtime = $4, touched = now(),
	writer = CASE WHEN $5 THEN NULL ELSE writer END,
	writer_until = CASE WHEN $5 THEN NULL ELSE writer_until END
WHERE id = $1;

-- name: ReleaseUpload
UPDATE sftp_uploads SET writer = NULL, writer_until = NULL WHERE id = $1 AND writer = $2;

-- name: RenewUploads
UPDATE sftp_uploads SET writer_until = now() + $2 * interval '1 millisecond' WHERE writer = $1;

-- name: UploadChunks
SELECT n, data FROM sftp_upload_chunks WHERE upload_id = $1 ORDER BY n;

-- name: LockUploadNamed
SELECT id, writer IS NOT NULL AND writer_until >= now() AND writer IS DISTINCT FROM $3
FROM sftp_uploads WHERE partner_id = $1 AND name = $2 FOR UPDATE;

-- name: RenameUpload
UPDATE sftp_uploads SET name = $2, touched = now(),
	writer = CASE WHEN $3 = '' THEN NULL ELSE $3 END,
	writer_until = CASE WHEN $3 = '' THEN NULL ELSE now() + $4 * interval '1 millisecond' END
WHERE id = $1
RETURNING {{upload_columns}};

-- name: DropUpload
DELETE FROM sftp_uploads WHERE id = $1;

-- name: DiscardUpload
DELETE FROM sftp_uploads WHERE id = $1 RETURNING {{upload_columns}};

-- name: SetUploadModTime
UPDATE sftp_uploads SET client_mtime = $3 WHERE partner_id = $1 AND name = $2;

-- name: ExpireUploads
DELETE FROM sftp_uploads WHERE touched < $1 AND (writer IS NULL OR writer_until < now())
RETURNING {{upload_columns}};
