-- +goose Up
-- Unfinished SFTP uploads live in the database, so an upload cut off on one
-- server is resumed on any other on the same database, and /inbox shows it
-- from every server. A row is a file of a partner not received yet: cut off
-- and waiting to be resumed, temp-named and waiting for a rename, or being
-- written (size is then what was stored at its last cut, not its live
-- size). Its bytes [0, size) are the rows of sftp_upload_chunks numbered
-- 0, 1, 2, … in order, of any size (as envelope_chunks: a resumed upload
-- adds chunks after the last); sha256_state is the SHA-256 state after
-- those bytes (Go's crypto/sha256 marshalled state), so a resume hashes only
-- what it adds. One row a name per partner: the constraint, not the
-- servers, makes two uploads of one name one.
--
-- writer/writer_until is a lease: the server writing the file (a handle is
-- open on it) renews it while it writes; another server resumes the file
-- only once it is released or has expired (its server died), so two
-- servers never append to one upload at once.
CREATE TABLE sftp_uploads (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partner_id   text NOT NULL REFERENCES partners (id),
    name         text NOT NULL,
    size         bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    sha256_state bytea NOT NULL,
    client_mtime timestamptz,
    started      timestamptz NOT NULL DEFAULT now(),
    touched      timestamptz NOT NULL DEFAULT now(),
    writer       text,
    writer_until timestamptz,
    CHECK ((writer IS NULL) = (writer_until IS NULL)),
    UNIQUE (partner_id, name)
);
CREATE INDEX sftp_uploads_touched ON sftp_uploads (touched);

-- Stored as envelope_chunks are (migrations 00005, 00245): rows of up to 7,400
-- bytes compressed in the table's own pages.
CREATE TABLE sftp_upload_chunks (
    upload_id bigint NOT NULL REFERENCES sftp_uploads (id) ON DELETE CASCADE,
    n         integer NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (upload_id, n)
);
ALTER TABLE sftp_upload_chunks ALTER COLUMN data SET STORAGE MAIN;
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE sftp_upload_chunks ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'this PostgreSQL has no lz4; unfinished uploads stay compressed with pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE sftp_upload_chunks;
DROP TABLE sftp_uploads;
