-- +goose Up

-- What an SFTP client sees in /inbox comes from the envelopes, so that every
-- connection (and every server on this database) shows the same files.
-- client_mtime is the modification time a client set on a received file
-- (setstat after the upload, as rclone, WinSCP and `put -p` do); it is shown
-- by stat and listing instead of received_at, so that a client comparing
-- times sees its own. It changes nothing of the file's bytes or outcome.
ALTER TABLE envelopes ADD COLUMN client_mtime timestamptz;

-- /inbox lists a partner's recent SFTP uploads.
CREATE INDEX envelopes_sftp_inbox ON envelopes (partner_id, received_at) WHERE source = 'sftp' AND status <> 'incomplete';

-- +goose Down
DROP INDEX envelopes_sftp_inbox;
ALTER TABLE envelopes DROP COLUMN client_mtime;
