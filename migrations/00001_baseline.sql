-- +goose Up

-- payintake's schema, as one baseline: every table, index, function and trigger the
-- server needs, in the order a reader meets them — partners, what arrives, employees,
-- records, results, review, corrected legs, dispatch, notifications. Later changes are
-- appended as their own numbered files; this file is never edited once released.
--
-- Rules that hold throughout:
-- - uniqueness is a constraint here, never a check in Go;
-- - money is numeric, never float;
-- - triggers guard invariants or write audit and outbox rows in the same transaction;
--   none creates business data: employees are onboarded by the engine's own statements,
--   before the records that name them;
-- - River's own tables are created by River's migrations, not here.

-- ================================================================================================
-- Partners and their credentials
-- ================================================================================================

-- A partner is one sender of payroll files: an employer, an EOR provider, an HR system.
CREATE TABLE partners (
    id text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    delimiter text DEFAULT ''::text NOT NULL,
    decimal_comma boolean DEFAULT false NOT NULL,
    date_format text DEFAULT ''::text NOT NULL,
    currency text DEFAULT ''::text NOT NULL,
    file_pattern text DEFAULT ''::text NOT NULL,
    mode text DEFAULT 'row'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    -- What to do with a row whose employee_ref has no mapping (SPEC "Employees").
    unknown_employee text DEFAULT 'create'::text NOT NULL,
    dispatch_target text,
    -- Where a partner's events go; NULL: the partner gets none.
    notify_url text,
    -- off: files are read as they come (an OpenPGP file is refused);
    -- accept: OpenPGP files are decrypted and verified, plain ones read;
    -- require: only files encrypted to the platform and signed by the partner.
    pgp text DEFAULT 'off'::text NOT NULL,
    -- The client addresses a partner may use its credentials from (SFTP keys,
    -- API tokens, webhook secrets): empty means anywhere. Checked by
    -- records.Store.PartnerAllowsFrom, at every door.
    allow_from cidr[] DEFAULT '{}'::cidr[] NOT NULL,
    CONSTRAINT partners_currency_check CHECK (((currency = ''::text) OR (currency ~ '^[A-Z]{3}$'::text))),
    CONSTRAINT partners_delimiter_check CHECK ((delimiter = ANY (ARRAY[''::text, ','::text, ';'::text, '|'::text, '	'::text]))),
    CONSTRAINT partners_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT partners_mode_check CHECK ((mode = ANY (ARRAY['row'::text, 'all-or-nothing'::text]))),
    CONSTRAINT partners_notify_url_check CHECK ((notify_url ~ '^https?://[^\s]+$'::text)),
    CONSTRAINT partners_pgp_check CHECK ((pgp = ANY (ARRAY['off'::text, 'accept'::text, 'require'::text]))),
    CONSTRAINT partners_unknown_employee_check CHECK ((unknown_employee = ANY (ARRAY['create'::text, 'reject'::text, 'hold'::text]))),
    CONSTRAINT partners_pkey PRIMARY KEY (id)
);

-- SSH public keys a partner may log in with; several at once so keys rotate without downtime.
CREATE TABLE partner_keys (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    fingerprint text NOT NULL,
    public_key text NOT NULL,
    comment text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT partner_keys_partner_id_fingerprint_key UNIQUE (partner_id, fingerprint),
    CONSTRAINT partner_keys_pkey PRIMARY KEY (id),
    CONSTRAINT partner_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- API tokens for the HTTP submission API. Only the SHA-256 of a token is kept:
-- tokens are 32 random bytes, so a fast hash is enough (nothing to brute-force).
-- prefix is the token's first characters, shown to operators to tell tokens apart.
CREATE TABLE api_tokens (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    token_hash bytea NOT NULL,
    prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    -- When a partner's API token was last accepted, to the minute (the request
    -- path writes it at most once a minute per token), so operators can tell
    -- which tokens are still in use before revoking one.
    last_used_at timestamp with time zone,
    CONSTRAINT api_tokens_token_hash_check CHECK ((length(token_hash) = 32)),
    CONSTRAINT api_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT api_tokens_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX api_tokens_partner ON api_tokens USING btree (partner_id) WHERE (revoked_at IS NULL);

-- Webhook signing secrets (Standard Webhooks). The secret itself must be kept:
-- verifying an HMAC needs the key. Several may be active at once for rotation.
CREATE TABLE webhook_secrets (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    -- The secret, sealed (AES-256-GCM, records/sealing.go) under a key outside
    -- the database, with the partner id as additional data: a dump alone holds
    -- no secret, and a sealed secret moved to another partner's row does not open.
    sealed bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT webhook_secrets_sealed_check CHECK ((length(sealed) > 21)),
    CONSTRAINT webhook_secrets_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_secrets_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX webhook_secrets_partner ON webhook_secrets USING btree (partner_id) WHERE (revoked_at IS NULL);

-- A partner's OpenPGP public keys, with their history: setting new keys
-- marks the others replaced, never deletes them, so an old upload's signer
-- stays named.
CREATE TABLE partner_pgp_keys (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    fingerprint text NOT NULL,
    user_id text DEFAULT ''::text NOT NULL,
    public_key text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    replaced_at timestamp with time zone,
    CONSTRAINT partner_pgp_keys_fingerprint_check CHECK ((fingerprint ~ '^[0-9A-F]{40,64}$'::text)),
    CONSTRAINT partner_pgp_keys_pkey PRIMARY KEY (id),
    CONSTRAINT partner_pgp_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE UNIQUE INDEX partner_pgp_keys_active ON partner_pgp_keys USING btree (partner_id, fingerprint) WHERE (replaced_at IS NULL);

-- A partner's profile (how its own export maps onto payintake's fields and
-- components), every version kept: version 1, 2, … per partner, the latest
-- the one files are read with. yaml is the file as the operator wrote it;
-- mapping is what it says, as records.PartnerProfile reads it (columns,
-- components, unknown_component, sheet, results). Who set it and when is
-- here and in the review audit.
CREATE TABLE partner_profiles (
    partner_id text NOT NULL,
    version integer NOT NULL,
    yaml text NOT NULL,
    mapping jsonb NOT NULL,
    set_by text NOT NULL,
    set_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT partner_profiles_version_check CHECK ((version > 0)),
    CONSTRAINT partner_profiles_pkey PRIMARY KEY (partner_id, version),
    CONSTRAINT partner_profiles_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- ================================================================================================
-- The platform's own keys
--
-- Secret halves are sealed (AES-256-GCM under the server's secret key) with the key's
-- fingerprint as additional data: a database dump alone decrypts nothing.
-- ================================================================================================

-- The platform's OpenPGP key pairs. Every key not retired decrypts; the newest
-- of them signs.
CREATE TABLE pgp_platform_keys (
    id bigserial NOT NULL,
    fingerprint text NOT NULL,
    algorithm text NOT NULL,
    public_key text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    retired_at timestamp with time zone,
    CONSTRAINT pgp_platform_keys_fingerprint_check CHECK ((fingerprint ~ '^[0-9A-F]{40,64}$'::text)),
    CONSTRAINT pgp_platform_keys_sealed_check CHECK ((length(sealed) > 21)),
    CONSTRAINT pgp_platform_keys_id_key UNIQUE (id),
    CONSTRAINT pgp_platform_keys_pkey PRIMARY KEY (fingerprint)
);

-- The SSH host keys of the SFTP door, shared by every server on this database
-- (a partner behind a load balancer sees the same keys from every replica). A key
-- is announced as `next` (clients learn it through OpenSSH's
-- hostkeys-00@openssh.com), served while `active`, and kept `retired`.
CREATE TABLE ssh_host_keys (
    id bigserial NOT NULL,
    key_type text NOT NULL,
    state text NOT NULL,
    fingerprint text NOT NULL,
    public_key bytea NOT NULL,
    sealed bytea NOT NULL,
    origin text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    activated_at timestamp with time zone,
    retired_at timestamp with time zone,
    CONSTRAINT ssh_host_keys_check CHECK (((state = 'active'::text) <= (activated_at IS NOT NULL))),
    CONSTRAINT ssh_host_keys_check1 CHECK (((state = 'retired'::text) = (retired_at IS NOT NULL))),
    CONSTRAINT ssh_host_keys_fingerprint_check CHECK ((fingerprint ~~ 'SHA256:%'::text)),
    CONSTRAINT ssh_host_keys_key_type_check CHECK ((key_type = ANY (ARRAY['ssh-ed25519'::text, 'ecdsa-sha2-nistp256'::text, 'ssh-rsa'::text]))),
    CONSTRAINT ssh_host_keys_sealed_check CHECK ((length(sealed) > 21)),
    CONSTRAINT ssh_host_keys_state_check CHECK ((state = ANY (ARRAY['next'::text, 'active'::text, 'retired'::text]))),
    CONSTRAINT ssh_host_keys_fingerprint_key UNIQUE (fingerprint),
    CONSTRAINT ssh_host_keys_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX ssh_host_keys_one_active ON ssh_host_keys USING btree (key_type) WHERE (state = 'active'::text);
CREATE UNIQUE INDEX ssh_host_keys_one_next ON ssh_host_keys USING btree (key_type) WHERE (state = 'next'::text);

-- ================================================================================================
-- What arrives: envelopes and their keys
--
-- Every file or body that arrives becomes an envelope with its original bytes, whatever
-- the door. A key is claimed once, by a primary key, in the transaction that stores
-- the bytes.
-- ================================================================================================

-- Every file that arrived, whatever became of it: the audit trail of what was sent.
--   received    bytes stored, waiting to be processed
--   processed   rows applied (or the file rejected as a whole); counts and the
--               result file (envelope_results) hold the outcome
--   replay      same key and same bytes as an earlier envelope: a repeated file,
--               answered with replay_of's result, nothing applied again
--   key_reuse   same key, different bytes: rejected loudly, nothing applied
--   incomplete  the upload was cut off before a clean close: never processed
-- seq orders a partner's envelopes by when they were received, for listings only;
-- records are ordered by their own versions.
CREATE TABLE envelopes (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    file_name text NOT NULL,
    submission_key text NOT NULL,
    sha256 bytea NOT NULL,
    size bigint NOT NULL,
    source text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    status text NOT NULL,
    replay_of bigint,
    seq bigint,
    counts jsonb,
    result_size bigint,
    processed_at timestamp with time zone,
    -- The profile version an envelope was read with (NULL: none, the partner
    -- had no profile then, or the file was not read).
    profile_version integer,
    -- The format its result file is served in, as the profile asked when the
    -- file was read (NULL: csv, the stored lines as they are; csv-excel: the
    -- same lines after a UTF-8 BOM, each line feed as CR LF; xlsx: the workbook
    -- built from the lines when they were stored, kept in result_workbooks,
    -- NAME.result.xlsx). The stored lines stay csv whatever the format, and
    -- result_size is the size served.
    result_format text,
    CONSTRAINT envelopes_check CHECK (((status = 'replay'::text) = (replay_of IS NOT NULL))),
    CONSTRAINT envelopes_result_format_check CHECK ((result_format = ANY (ARRAY['csv-excel'::text, 'xlsx'::text]))),
    CONSTRAINT envelopes_sha256_check CHECK ((length(sha256) = 32)),
    CONSTRAINT envelopes_size_check CHECK ((size >= 0)),
    CONSTRAINT envelopes_status_check CHECK ((status = ANY (ARRAY['received'::text, 'processed'::text, 'replay'::text, 'key_reuse'::text, 'incomplete'::text]))),
    CONSTRAINT envelopes_pkey PRIMARY KEY (id),
    CONSTRAINT envelopes_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id),
    CONSTRAINT envelopes_replay_of_fkey FOREIGN KEY (replay_of) REFERENCES envelopes(id)
);
CREATE INDEX envelopes_partner_name ON envelopes USING btree (partner_id, lower(file_name), id);
CREATE INDEX envelopes_received ON envelopes USING btree (id) WHERE (status = 'received'::text);
CREATE INDEX envelopes_sftp_inbox ON envelopes USING btree (partner_id, received_at) WHERE ((source = 'sftp'::text) AND (status <> 'incomplete'::text));

-- The submission key, claimed once. The primary key is what makes a concurrent
-- second upload of the same file wait for, and then see, the first.
CREATE TABLE submissions (
    partner_id text NOT NULL,
    submission_key text NOT NULL,
    envelope_id bigint NOT NULL,
    sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT submissions_envelope_id_key UNIQUE (envelope_id),
    CONSTRAINT submissions_pkey PRIMARY KEY (partner_id, submission_key),
    CONSTRAINT submissions_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id),
    CONSTRAINT submissions_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- The original bytes of an envelope, in order: rows of up to 8,000 bytes, one a page,
-- stored as they came (STORAGE PLAIN: never compressed, never TOASTed), streamed, never
-- held whole. The upload's slowest stage is this table's backend: lz4 in the rows took a
-- quarter of its CPU, and a foreign key's check per row up to a sixth, so neither is here; a
-- CSV takes twice the space it would compressed. The reference to envelopes is kept by
-- the writers (records/stream.go and envelopebytes.go copy chunks only in the
-- transaction that inserted their envelope's row, so no other can delete it meanwhile)
-- and by the guards below on envelopes: an envelope with chunks is neither deleted nor
-- renumbered, and envelopes are not truncated while chunks remain. Nothing checks a
-- chunk's own insert or update: processing refuses an envelope whose chunks do not
-- add up to its size (records/processing.go).
CREATE TABLE envelope_chunks (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT envelope_chunks_pkey PRIMARY KEY (envelope_id, n)
);
ALTER TABLE ONLY envelope_chunks ALTER COLUMN data SET STORAGE PLAIN;

-- The guard of a reference that its table checks otherwise than by a foreign key
-- (envelope_chunks here; employees' and records' references, checked per statement,
-- below): a row still referenced is neither deleted nor renumbered, and the table is
-- not truncated while the referencing one has rows (TRUNCATE … CASCADE empties only the
-- tables with foreign keys), refused with the error a foreign key gives. Its arguments:
-- the referencing table and its column. Fired AFTER, so a TRUNCATE of both tables in
-- one statement passes.
-- +goose StatementBegin
CREATE FUNCTION referenced_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
DECLARE
    referenced boolean;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', TG_ARGV[0]) INTO referenced;
        IF referenced THEN
            RAISE EXCEPTION 'truncate of table "%" leaves rows of table "%" referencing it', TG_TABLE_NAME, TG_ARGV[0]
                USING ERRCODE = 'foreign_key_violation', HINT = format('Truncate table "%s" in the same statement.', TG_ARGV[0]);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I = $1)', TG_ARGV[0], TG_ARGV[1]) INTO referenced USING OLD.id;
    IF referenced THEN
        RAISE EXCEPTION 'update or delete on table "%" violates the reference from table "%"', TG_TABLE_NAME, TG_ARGV[0]
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (id)=(%s) is still referenced from table "%s".', OLD.id, TG_ARGV[0]);
    END IF;
    RETURN NULL;
END
$_$;
-- +goose StatementEnd

CREATE TRIGGER envelopes_referenced_by_chunks AFTER DELETE OR UPDATE OF id ON envelopes FOR EACH ROW EXECUTE FUNCTION referenced_guard('envelope_chunks', 'envelope_id');
CREATE TRIGGER envelopes_truncate_referenced_by_chunks AFTER TRUNCATE ON envelopes FOR EACH STATEMENT EXECUTE FUNCTION referenced_guard('envelope_chunks', 'envelope_id');

-- The time a client set on a received SFTP file lives beside the envelope,
-- not in its row: an UPDATE of the envelope row takes the row lock that
-- processing uses as its lease, so a setstat there would take that lock and
-- make a worker think another process has the envelope.
CREATE TABLE envelope_client_times (
    envelope_id bigint NOT NULL,
    client_mtime timestamp with time zone NOT NULL,
    CONSTRAINT envelope_client_times_pkey PRIMARY KEY (envelope_id),
    CONSTRAINT envelope_client_times_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);

-- What happened to an envelope whose processing did not finish: how often
-- it failed (and the last error), and how often the orphan sweep queued it
-- again. The sweep waits longer after each requeue and stops after a few,
-- so a file that kills or stalls its processor is not retried in a loop;
-- operators see such envelopes in the logs and in
-- payintake_envelopes_stuck.
CREATE TABLE envelope_attempts (
    envelope_id bigint NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    last_error text,
    last_failed_at timestamp with time zone,
    requeues integer DEFAULT 0 NOT NULL,
    last_requeued_at timestamp with time zone,
    CONSTRAINT envelope_attempts_pkey PRIMARY KEY (envelope_id),
    CONSTRAINT envelope_attempts_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);

-- What an OpenPGP upload (or a plain one refused for want of it) was, as
-- decided when it was received: which keys, the plaintext's hash (the
-- submission's identity) or the refusal, and whether its results go back
-- sealed to the partner.
CREATE TABLE envelope_pgp (
    envelope_id bigint NOT NULL,
    armored boolean DEFAULT false NOT NULL,
    encrypted boolean NOT NULL,
    signed boolean NOT NULL,
    decrypted_with text,
    signer text,
    plaintext_sha256 bytea,
    plaintext_size bigint,
    refusal_code text,
    refusal_message text,
    seal_results boolean NOT NULL,
    CONSTRAINT envelope_pgp_check CHECK (((refusal_code IS NULL) = (plaintext_sha256 IS NOT NULL))),
    CONSTRAINT envelope_pgp_pkey PRIMARY KEY (envelope_id),
    CONSTRAINT envelope_pgp_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);

-- The HTTP API's Idempotency-Key leases (IETF httpapi Idempotency-Key draft),
-- per partner, key case-folded: a request holds its key's lease while it reads
-- and processes the body, so a second request with the key gets 409 rather
-- than racing it. A lease is renewed while its request works, released when it
-- ends, and taken over once it runs out (a crashed request) or once the key's
-- submission is processed. The key's answer is not kept here: the key is the
-- submission key, so a retry is answered from the submission (submissions,
-- envelopes), which stays for good. Leases left by dead requests are reaped.
CREATE TABLE idempotency_keys (
    partner_id text NOT NULL,
    idem_key text NOT NULL,
    lease_owner bytea NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_idem_key_check CHECK (((length(idem_key) >= 1) AND (length(idem_key) <= 255))),
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (partner_id, idem_key),
    CONSTRAINT idempotency_keys_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys USING btree (created_at);

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
    id bigint GENERATED ALWAYS AS IDENTITY,
    partner_id text NOT NULL,
    name text NOT NULL,
    size bigint DEFAULT 0 NOT NULL,
    sha256_state bytea NOT NULL,
    client_mtime timestamp with time zone,
    started timestamp with time zone DEFAULT now() NOT NULL,
    touched timestamp with time zone DEFAULT now() NOT NULL,
    writer text,
    writer_until timestamp with time zone,
    CONSTRAINT sftp_uploads_check CHECK (((writer IS NULL) = (writer_until IS NULL))),
    CONSTRAINT sftp_uploads_size_check CHECK ((size >= 0)),
    CONSTRAINT sftp_uploads_partner_id_name_key UNIQUE (partner_id, name),
    CONSTRAINT sftp_uploads_pkey PRIMARY KEY (id),
    CONSTRAINT sftp_uploads_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX sftp_uploads_touched ON sftp_uploads USING btree (touched);

-- The bytes of an unfinished upload, stored as envelope_chunks are: rows of up to
-- 8,000 bytes, one a page, uncompressed.
CREATE TABLE sftp_upload_chunks (
    upload_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT sftp_upload_chunks_pkey PRIMARY KEY (upload_id, n),
    CONSTRAINT sftp_upload_chunks_upload_id_fkey FOREIGN KEY (upload_id) REFERENCES sftp_uploads(id) ON DELETE CASCADE
);
ALTER TABLE ONLY sftp_upload_chunks ALTER COLUMN data SET STORAGE PLAIN;

-- Every signed webhook delivery, claimed once by its webhook-id (the primary
-- key decides concurrent duplicates), with its raw body for audit and the
-- answer given, replayed verbatim to a redelivery.
CREATE TABLE webhook_deliveries (
    partner_id text NOT NULL,
    webhook_id text NOT NULL,
    body_sha256 bytea NOT NULL,
    body bytea NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    entity_id text,
    version bigint,
    outcome text,
    code text,
    record_id bigint,
    record_version integer,
    response_status integer,
    response_type text,
    response_body bytea,
    CONSTRAINT webhook_deliveries_body_sha256_check CHECK ((length(body_sha256) = 32)),
    CONSTRAINT webhook_deliveries_webhook_id_check CHECK (((length(webhook_id) >= 1) AND (length(webhook_id) <= 255))),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (partner_id, webhook_id),
    CONSTRAINT webhook_deliveries_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX webhook_deliveries_record ON webhook_deliveries USING btree (record_id);

-- The highest version accepted (applied, unchanged or held) per webhook entity:
-- a delivery with a version not above it is stale.
CREATE TABLE webhook_entities (
    partner_id text NOT NULL,
    entity_id text NOT NULL,
    version bigint NOT NULL,
    record_id bigint,
    webhook_id text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_entities_pkey PRIMARY KEY (partner_id, entity_id),
    CONSTRAINT webhook_entities_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- Webhook bodies refused as invalid (422), kept for audit: nothing was applied.
CREATE TABLE webhook_quarantine (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    webhook_id text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    body bytea NOT NULL,
    code text NOT NULL,
    field text DEFAULT ''::text NOT NULL,
    message text NOT NULL,
    CONSTRAINT webhook_quarantine_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_quarantine_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX webhook_quarantine_partner ON webhook_quarantine USING btree (partner_id, id);

-- ================================================================================================
-- Employees
-- ================================================================================================

-- The mapping kept at onboarding: a partner's employee_ref names one worker,
-- whom the platform (and the payroll vendor) knows by employee_id. A mapping
-- is stored once and never changed by a file: employee_id is unique across
-- partners, and a trigger refuses any update of it.
--   source: import   `payintake employees import`
--           derived  created for an unknown reference (--unknown-employee create,
--                    or an approved unknown_employee exception)
CREATE TABLE employees (
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    employee_id text NOT NULL COLLATE pg_catalog."C",
    name text DEFAULT ''::text NOT NULL,
    source text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT employees_employee_id_check CHECK (((length(employee_id) >= 1) AND (length(employee_id) <= 128) AND ((employee_id COLLATE "default") !~ '[[:cntrl:]]'::text))),
    CONSTRAINT employees_source_check CHECK ((source = ANY (ARRAY['import'::text, 'derived'::text]))),
    CONSTRAINT employees_employee_id_key UNIQUE (employee_id),
    CONSTRAINT employees_pkey PRIMARY KEY (partner_id, employee_ref)
);

-- +goose StatementBegin
CREATE FUNCTION derived_employee_id(partner text, employee_ref text) RETURNS text
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
    SELECT 'emp_' || left(encode(sha256(convert_to(partner || ':' || employee_ref, 'UTF8')), 'hex'), 20)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION employees_check_partner() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    partner_ids text[];
    n bigint;
    bad text;
BEGIN
    SELECT array_agg(k.partner_id) INTO partner_ids
    FROM (SELECT partner_id FROM new_rows GROUP BY partner_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert on table "employees" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER employees_partner_insert AFTER INSERT ON employees REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION employees_check_partner();

-- +goose StatementBegin
CREATE FUNCTION employees_immutable() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.employee_id IS DISTINCT FROM OLD.employee_id
       OR NEW.partner_id IS DISTINCT FROM OLD.partner_id
       OR NEW.employee_ref IS DISTINCT FROM OLD.employee_ref THEN
        RAISE EXCEPTION 'employee mapping %/% is kept as onboarded and cannot be changed', OLD.partner_id, OLD.employee_ref
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER employees_immutable BEFORE UPDATE ON employees FOR EACH ROW EXECUTE FUNCTION employees_immutable();

-- +goose StatementBegin
CREATE FUNCTION employees_never_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'employee mapping %/% is kept as onboarded and cannot be deleted', OLD.partner_id, OLD.employee_ref
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER employees_never_deleted BEFORE DELETE ON employees FOR EACH ROW EXECUTE FUNCTION employees_never_deleted();

CREATE TRIGGER partners_referenced_by_employees AFTER DELETE OR UPDATE OF id ON partners FOR EACH ROW EXECUTE FUNCTION referenced_guard('employees', 'partner_id');
CREATE TRIGGER partners_truncate_referenced_by_employees AFTER TRUNCATE ON partners FOR EACH STATEMENT EXECUTE FUNCTION referenced_guard('employees', 'partner_id');

-- ================================================================================================
-- Records: the current version of every business fact, and its history
-- ================================================================================================

-- The current version of every business fact. The natural key is unique here,
-- not in application code.
CREATE TABLE records (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    pay_period text NOT NULL,
    component text NOT NULL,
    amount numeric NOT NULL,
    currency text NOT NULL,
    hours numeric,
    rate numeric,
    pay_date date,
    content_hash bytea NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    last_seq bigint,
    locked_reason text,
    locked_at timestamp with time zone,
    envelope_id bigint,
    line integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT records_locked_reason_check CHECK ((locked_reason = ANY (ARRAY['approved'::text, 'paid'::text]))),
    CONSTRAINT records_natural_key UNIQUE (partner_id, pay_period, employee_ref, component),
    CONSTRAINT records_pkey PRIMARY KEY (id)
);

ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_record_id_fkey FOREIGN KEY (record_id) REFERENCES records(id);

ALTER TABLE webhook_entities ADD CONSTRAINT webhook_entities_record_id_fkey FOREIGN KEY (record_id) REFERENCES records(id);

-- Every version a record had before it was replaced, with what replaced it.
CREATE TABLE record_history (
    record_id bigint NOT NULL,
    version integer NOT NULL,
    amount numeric NOT NULL,
    currency text NOT NULL,
    hours numeric,
    rate numeric,
    pay_date date,
    content_hash bytea NOT NULL,
    envelope_id bigint,
    line integer,
    written_at timestamp with time zone NOT NULL,
    replaced_at timestamp with time zone DEFAULT now() NOT NULL,
    replaced_by text NOT NULL,
    CONSTRAINT record_history_pkey PRIMARY KEY (record_id, version),
    CONSTRAINT record_history_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id),
    CONSTRAINT record_history_record_id_fkey FOREIGN KEY (record_id) REFERENCES records(id)
);

-- Every new record's employee is mapped, and its partner and envelope exist: one
-- check per statement over its new rows (a per-row foreign key would cost a lookup per row).
-- It only refuses: the engine onboards a file's unknown employees by a statement of
-- its own before the records that name them.
-- +goose StatementBegin
CREATE FUNCTION records_check_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
DECLARE
    probe_max bigint := 20 * (pg_relation_size('employees') / current_setting('block_size')::bigint);
    emp_partners text[];
    refs text[];
    partner_ids text[];
    envelope_ids bigint[];
    missing_partner text;
    missing_ref text;
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows, two hash tables: the distinct employees
    -- (g = 1) and the distinct partner and envelope references (g = 2).
    SELECT array_agg(k.partner_id) FILTER (WHERE k.g = 1), array_agg(k.employee_ref) FILTER (WHERE k.g = 1),
           array_agg(DISTINCT k.partner_id) FILTER (WHERE k.g = 2), array_remove(array_agg(DISTINCT k.envelope_id) FILTER (WHERE k.g = 2), NULL)
    INTO emp_partners, refs, partner_ids, envelope_ids
    FROM (SELECT partner_id, employee_ref, envelope_id, GROUPING(employee_ref, envelope_id) AS g FROM new_rows
          GROUP BY GROUPING SETS ((partner_id, employee_ref), (partner_id, envelope_id))) k;
    IF refs IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(refs) <= probe_max THEN
        -- Few employees for the mappings there are: one probe each.
        SELECT n.partner_id, n.employee_ref INTO missing_partner, missing_ref
        FROM unnest(emp_partners, refs) n(partner_id, employee_ref)
        LEFT JOIN LATERAL (SELECT true AS mapped FROM employees e
            WHERE e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref LIMIT 1) m ON true
        WHERE m.mapped IS NULL;
    ELSE
        -- Many: the statement's partners' mappings hashed, read by the
        -- primary key's leading partner_id, not every partner's. EXECUTE
        -- plans for the arrays' size; it sets no FOUND: a row found has a
        -- partner_id (never NULL).
        EXECUTE 'SELECT n.partner_id, n.employee_ref FROM unnest($1, $2) n(partner_id, employee_ref)
            WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.partner_id = ANY ($3)
                AND e.partner_id = n.partner_id AND e.employee_ref = n.employee_ref)'
            INTO missing_partner, missing_ref USING emp_partners, refs, partner_ids;
    END IF;
    IF missing_partner IS NOT NULL THEN
        RAISE EXCEPTION 'record of %/% has no employee mapping', missing_partner, missing_ref
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'store the mapping (employees) in the same transaction before the record';
    END IF;
    -- The references, as records_check_references checks them: the
    -- FOR KEY SHARE locks a foreign key takes, the error it raises.
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$_$;
-- +goose StatementEnd

CREATE TRIGGER records_check_insert AFTER INSERT ON records REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_insert();

-- +goose StatementBegin
CREATE FUNCTION records_check_references() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    partner_ids text[];
    envelope_ids bigint[];
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows: the distinct references (usually one partner, one envelope).
    SELECT array_agg(DISTINCT k.partner_id), array_remove(array_agg(DISTINCT k.envelope_id), NULL)
    INTO partner_ids, envelope_ids
    FROM (SELECT partner_id, envelope_id FROM new_rows GROUP BY partner_id, envelope_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER records_references_update AFTER UPDATE ON records REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_references();

CREATE TRIGGER envelopes_referenced_by_records AFTER DELETE OR UPDATE OF id ON envelopes FOR EACH ROW EXECUTE FUNCTION referenced_guard('records', 'envelope_id');
CREATE TRIGGER envelopes_truncate_referenced_by_records AFTER TRUNCATE ON envelopes FOR EACH STATEMENT EXECUTE FUNCTION referenced_guard('records', 'envelope_id');

CREATE TRIGGER partners_referenced_by_records AFTER DELETE OR UPDATE OF id ON partners FOR EACH ROW EXECUTE FUNCTION referenced_guard('records', 'partner_id');
CREATE TRIGGER partners_truncate_referenced_by_records AFTER TRUNCATE ON partners FOR EACH STATEMENT EXECUTE FUNCTION referenced_guard('records', 'partner_id');

-- ================================================================================================
-- Result files
-- ================================================================================================

-- The result file of each processed envelope, as the bytes the partner downloads,
-- written in the same transaction as the records it reports. Chunk -1 is the
-- header. A repeated file is answered with these bytes again, byte for byte.
CREATE TABLE envelope_results (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT envelope_results_pkey PRIMARY KEY (envelope_id, n),
    CONSTRAINT envelope_results_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);
ALTER TABLE ONLY envelope_results ALTER COLUMN data SET COMPRESSION lz4;

-- The result of an envelope whose partner's profile asked for results: xlsx, as the
-- workbook the partner downloads: built once from envelope_results, in the transaction
-- that stores them, and kept in chunks (STORAGE MAIN: compressed when it pays, which
-- the zip's deflated bytes rarely do, and kept in the table's pages). Every download and
-- every repeat reads these bytes; nothing builds the workbook again, so what a partner got
-- never depends on the version of the writer serving it.
CREATE TABLE result_workbooks (
    envelope_id bigint NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT result_workbooks_pkey PRIMARY KEY (envelope_id, n),
    CONSTRAINT result_workbooks_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);
ALTER TABLE ONLY result_workbooks ALTER COLUMN data SET STORAGE MAIN;
ALTER TABLE ONLY result_workbooks ALTER COLUMN data SET COMPRESSION lz4;

-- A result or review report sealed for its partner, stored once in chunks: the
-- encryption is randomised, so every read after the first returns these bytes, never a
-- new encryption.
CREATE TABLE sealed_results (
    envelope_id bigint NOT NULL,
    kind text NOT NULL,
    recipient text NOT NULL,
    signer text NOT NULL,
    size bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sealed_results_kind_check CHECK ((kind = ANY (ARRAY['result'::text, 'review'::text]))),
    CONSTRAINT sealed_results_pkey PRIMARY KEY (envelope_id, kind),
    CONSTRAINT sealed_results_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);

CREATE TABLE sealed_result_chunks (
    envelope_id bigint NOT NULL,
    kind text NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT sealed_result_chunks_pkey PRIMARY KEY (envelope_id, kind, n),
    CONSTRAINT sealed_result_chunks_envelope_id_kind_fkey FOREIGN KEY (envelope_id, kind) REFERENCES sealed_results(envelope_id, kind) ON DELETE CASCADE
);

-- ================================================================================================
-- Review: closed periods, held exceptions and who decided
-- ================================================================================================

-- A closed period: its records are locked and it takes no new natural keys.
CREATE TABLE period_locks (
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    reason text NOT NULL,
    locked_by text NOT NULL,
    locked_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT period_locks_reason_check CHECK ((reason = ANY (ARRAY['approved'::text, 'paid'::text]))),
    CONSTRAINT period_locks_pkey PRIMARY KEY (partner_id, pay_period),
    CONSTRAINT period_locks_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- Every lock and unlock of a period, with who, when and why. Locks are
-- recorded by a trigger on period_locks (however they are made); unlocks by
-- records.UnlockPeriod, which must give a reason.
CREATE TABLE lock_events (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    action text NOT NULL,
    reason text NOT NULL,
    by text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    records bigint,
    CONSTRAINT lock_events_action_check CHECK ((action = ANY (ARRAY['lock'::text, 'unlock'::text]))),
    CONSTRAINT lock_events_pkey PRIMARY KEY (id),
    CONSTRAINT lock_events_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX lock_events_period ON lock_events USING btree (partner_id, pay_period, id);

-- A change that met a locked record or a closed period, held for a human; or
-- a row held for its employee (unknown_employee) or its component code
-- (unknown_component: a code the partner's profile does not map, under
-- unknown_component: hold). partner_code is that code as read (the row's
-- component while it is held, kept once a reviewer approves the row with
-- the component the code means, which then becomes its component).
CREATE TABLE exceptions (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    employee_ref text NOT NULL,
    pay_period text NOT NULL,
    component text NOT NULL,
    record_id bigint,
    code text NOT NULL,
    current jsonb,
    proposed jsonb NOT NULL,
    proposed_hash bytea NOT NULL,
    differing text[] NOT NULL,
    envelope_id bigint,
    line integer,
    row_no integer,
    status text DEFAULT 'open'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    decided_by text,
    decided_at timestamp with time zone,
    note text,
    superseded_by bigint,
    partner_code text,
    CONSTRAINT exceptions_code_check CHECK ((code = ANY (ARRAY['record_locked'::text, 'period_locked'::text, 'unknown_employee'::text, 'unknown_component'::text]))),
    CONSTRAINT exceptions_status_check CHECK ((status = ANY (ARRAY['open'::text, 'approved'::text, 'rejected'::text, 'superseded'::text]))),
    CONSTRAINT exceptions_pkey PRIMARY KEY (id),
    CONSTRAINT exceptions_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id),
    CONSTRAINT exceptions_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id),
    CONSTRAINT exceptions_record_id_fkey FOREIGN KEY (record_id) REFERENCES records(id),
    CONSTRAINT exceptions_superseded_by_fkey FOREIGN KEY (superseded_by) REFERENCES exceptions(id)
);
CREATE INDEX exceptions_envelope ON exceptions USING btree (envelope_id);
CREATE UNIQUE INDEX exceptions_one_open ON exceptions USING btree (partner_id, employee_ref, pay_period, component) WHERE (status = 'open'::text);
CREATE INDEX exceptions_status ON exceptions USING btree (status, partner_id, id);

-- What reviewers said a partner's component codes mean: approving a row held
-- for a code its profile does not map names the component, and the
-- partner's later files read the code as that component (a code the
-- profile maps keeps the profile's). One meaning per code, kept with the
-- exception whose approval gave it, who and when.
CREATE TABLE component_codes (
    partner_id text NOT NULL,
    code text NOT NULL,
    component text NOT NULL,
    exception_id bigint NOT NULL,
    decided_by text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT component_codes_pkey PRIMARY KEY (partner_id, code),
    CONSTRAINT component_codes_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id),
    CONSTRAINT component_codes_exception_id_fkey FOREIGN KEY (exception_id) REFERENCES exceptions(id)
);

-- Reviewers: the people who decide held exceptions (CLI `reviewer add`).
-- password_hash is an argon2id PHC string ($argon2id$v=19$m=...,t=...,p=...$salt$hash).
-- partners empty means the reviewer may decide for every partner; otherwise only these.
CREATE TABLE reviewers (
    name text NOT NULL,
    password_hash text NOT NULL,
    partners text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    CONSTRAINT reviewers_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'::text)),
    CONSTRAINT reviewers_pkey PRIMARY KEY (name)
);

-- Logged-in reviewers: console sessions (cookie) and API bearer tokens.
-- Only a SHA-256 of the token is kept. csrf_token is checked on every console POST.
CREATE TABLE reviewer_sessions (
    token_hash bytea NOT NULL,
    reviewer text NOT NULL,
    kind text NOT NULL,
    csrf_token text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT reviewer_sessions_kind_check CHECK ((kind = ANY (ARRAY['console'::text, 'api'::text]))),
    CONSTRAINT reviewer_sessions_token_hash_check CHECK ((length(token_hash) = 32)),
    CONSTRAINT reviewer_sessions_pkey PRIMARY KEY (token_hash),
    CONSTRAINT reviewer_sessions_reviewer_fkey FOREIGN KEY (reviewer) REFERENCES reviewers(name)
);
CREATE INDEX reviewer_sessions_expiry ON reviewer_sessions USING btree (expires_at);

-- What reviewers did and tried: decisions (written in the same transaction as
-- their effect), logins, refusals. via: cli, api or console for reviewers and operators;
-- sftp, http or webhook for a partner's refused login or request.
CREATE TABLE review_audit (
    id bigserial NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor text NOT NULL,
    via text NOT NULL,
    action text NOT NULL,
    exception_id bigint,
    partner_id text,
    detail text DEFAULT ''::text NOT NULL,
    CONSTRAINT review_audit_via_check CHECK ((via = ANY (ARRAY['cli'::text, 'api'::text, 'console'::text, 'sftp'::text, 'http'::text, 'webhook'::text]))),
    CONSTRAINT review_audit_pkey PRIMARY KEY (id),
    CONSTRAINT review_audit_exception_id_fkey FOREIGN KEY (exception_id) REFERENCES exceptions(id)
);
CREATE INDEX review_audit_exception ON review_audit USING btree (exception_id);

-- Failed reviewer logins (console, API), per account name and per client
-- address. After a few failures each further one locks the name or address
-- for longer (records.RecordLoginFailure); a login while locked is refused
-- without checking the password. A successful login clears the rows, and
-- `payintake reviewer unlock NAME` lifts an account's lock.
CREATE TABLE login_failures (
    scope text NOT NULL,
    key text NOT NULL,
    failures integer NOT NULL,
    last_failed_at timestamp with time zone NOT NULL,
    locked_until timestamp with time zone,
    CONSTRAINT login_failures_scope_check CHECK ((scope = ANY (ARRAY['account'::text, 'address'::text]))),
    CONSTRAINT login_failures_pkey PRIMARY KEY (scope, key)
);

-- The review report of a submission: what reviewers decided about its held
-- rows, as the CSV bytes the partner downloads as NAME.review.csv. Written once
-- (records.WriteReviewReports), in the transaction that closes the envelope's
-- last open exception.
CREATE TABLE envelope_reviews (
    envelope_id bigint NOT NULL,
    data bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT envelope_reviews_pkey PRIMARY KEY (envelope_id),
    CONSTRAINT envelope_reviews_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes(id)
);

-- +goose StatementBegin
CREATE FUNCTION period_locks_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO lock_events (partner_id, pay_period, action, reason, by, at)
    VALUES (NEW.partner_id, NEW.pay_period, 'lock', NEW.reason, NEW.locked_by, NEW.locked_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER period_locks_event AFTER INSERT OR UPDATE ON period_locks FOR EACH ROW EXECUTE FUNCTION period_locks_event();

-- ================================================================================================
-- Corrected legs: rows of a submission sent again one by one
-- ================================================================================================

-- Leg replays: corrected rows of a submission sent again one by one
-- (POST /v1/submissions/{id}/replays). A replay is claimed once per
-- (partner, submission, Idempotency-Key); its body, answer and result are
-- kept for audit and replayed verbatim to a repeat of the request.
CREATE TABLE replays (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    of_envelope bigint NOT NULL,
    idem_key text NOT NULL,
    source text NOT NULL,
    body_sha256 bytea NOT NULL,
    body bytea NOT NULL,
    counts jsonb NOT NULL,
    result bytea NOT NULL,
    response_status integer NOT NULL,
    response_body bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    -- A replay's stored answer is a records.StoredAnswer, as an idempotency
    -- key's and a webhook's: a code, a format (the door's content type) and
    -- the bytes, opaque to the store. Every row gives its format: no
    -- default, because the store does not choose a door's format.
    response_type text NOT NULL,
    CONSTRAINT replays_body_sha256_check CHECK ((length(body_sha256) = 32)),
    CONSTRAINT replays_partner_id_of_envelope_idem_key_key UNIQUE (partner_id, of_envelope, idem_key),
    CONSTRAINT replays_pkey PRIMARY KEY (id),
    CONSTRAINT replays_of_envelope_fkey FOREIGN KEY (of_envelope) REFERENCES envelopes(id),
    CONSTRAINT replays_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);

-- One row per leg (a row of a submission) ever replayed, keyed by its leg
-- key HMAC-SHA256(submission key, row index): the latest outcome and the
-- replay that produced it. A settled leg (any outcome but rejected) is
-- never applied again: the upsert that claims a leg for a replay does
-- nothing on a settled one, so the key's uniqueness decides, not Go.
CREATE TABLE replay_legs (
    partner_id text NOT NULL,
    leg_key bytea NOT NULL,
    of_envelope bigint NOT NULL,
    row_no integer NOT NULL,
    replay_id bigint NOT NULL,
    outcome text,
    code text,
    result_line text,
    settled boolean DEFAULT false NOT NULL,
    CONSTRAINT replay_legs_check CHECK (((NOT settled) OR ((outcome IS NOT NULL) AND (outcome <> 'rejected'::text)))),
    CONSTRAINT replay_legs_leg_key_check CHECK ((length(leg_key) = 32)),
    CONSTRAINT replay_legs_row_no_check CHECK ((row_no > 0)),
    CONSTRAINT replay_legs_of_envelope_row_no_key UNIQUE (of_envelope, row_no),
    CONSTRAINT replay_legs_pkey PRIMARY KEY (partner_id, leg_key),
    CONSTRAINT replay_legs_of_envelope_fkey FOREIGN KEY (of_envelope) REFERENCES envelopes(id),
    CONSTRAINT replay_legs_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id),
    CONSTRAINT replay_legs_replay_id_fkey FOREIGN KEY (replay_id) REFERENCES replays(id)
);

-- ================================================================================================
-- Dispatch to the payroll vendor
-- ================================================================================================

-- A payroll vendor's batch API. The bearer token is not kept here: token_file
-- names a file (readable by the serving process) whose first line is the
-- token, read at each run, so the token can be rotated by replacing the file
-- and never lands in the database or its backups. rate_limit 0: no limit.
CREATE TABLE dispatch_targets (
    name text NOT NULL,
    url text NOT NULL,
    token_file text DEFAULT ''::text NOT NULL,
    rate_limit numeric DEFAULT 10 NOT NULL,
    chunk_size integer NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    retry_base_ms bigint DEFAULT 2000 NOT NULL,
    timeout_ms bigint DEFAULT 10000 NOT NULL,
    line_status boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispatch_targets_chunk_size_check CHECK (((chunk_size >= 1) AND (chunk_size <= 10000))),
    CONSTRAINT dispatch_targets_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT dispatch_targets_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT dispatch_targets_rate_limit_check CHECK ((rate_limit >= (0)::numeric)),
    CONSTRAINT dispatch_targets_retry_base_ms_check CHECK ((retry_base_ms >= 0)),
    CONSTRAINT dispatch_targets_timeout_ms_check CHECK ((timeout_ms > 0)),
    CONSTRAINT dispatch_targets_url_check CHECK ((url ~ '^https?://'::text)),
    CONSTRAINT dispatch_targets_pkey PRIMARY KEY (name)
);

ALTER TABLE partners ADD CONSTRAINT partners_dispatch_target_fkey FOREIGN KEY (dispatch_target) REFERENCES dispatch_targets(name);

-- One run of a locked period: its resume record. run counts from 1 and goes
-- up only when the period is unlocked and locked again (the number of unlock
-- events + 1); the batch key is derived from (partner, period, run) in Go
-- (dispatch.BatchKey). The run is the outbox of the dispatch work: it is
-- written by the triggers below in the transaction of the lock or approval,
-- and serve's sweep queues a River job for every run in_progress.
--   total    lines due in the run; settled: succeeded + dead-lettered
--   cursor   the highest due line id sent and recorded at least once
--   requests requests sent for the run, retries included
CREATE TABLE dispatch_runs (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    run integer NOT NULL,
    target text NOT NULL,
    state text DEFAULT 'in_progress'::text NOT NULL,
    total integer DEFAULT 0 NOT NULL,
    settled integer DEFAULT 0 NOT NULL,
    cursor bigint DEFAULT 0 NOT NULL,
    requests bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT dispatch_runs_run_check CHECK ((run >= 1)),
    CONSTRAINT dispatch_runs_state_check CHECK ((state = ANY (ARRAY['in_progress'::text, 'complete'::text]))),
    CONSTRAINT dispatch_runs_partner_id_pay_period_run_key UNIQUE (partner_id, pay_period, run),
    CONSTRAINT dispatch_runs_pkey PRIMARY KEY (id),
    CONSTRAINT dispatch_runs_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id),
    CONSTRAINT dispatch_runs_target_fkey FOREIGN KEY (target) REFERENCES dispatch_targets(name)
);
CREATE INDEX dispatch_runs_open ON dispatch_runs USING btree (id) WHERE (state = 'in_progress'::text);

-- The lines due in a run: one record version each, with its values as they
-- were when it became due. key is filled when the dispatcher first takes the
-- line (the key rule lives in Go only). state: pending, succeeded, failed
-- (dead letter), conflict (its key already holds another request hash: never
-- sent). round goes up when a line is put back for a later chunk (207).
CREATE TABLE dispatch_due (
    id bigserial NOT NULL,
    run_id bigint NOT NULL,
    record_id bigint NOT NULL,
    version integer NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    amount text NOT NULL,
    currency text NOT NULL,
    hours text,
    rate text,
    pay_date text,
    key text,
    state text DEFAULT 'pending'::text NOT NULL,
    round integer DEFAULT 0 NOT NULL,
    CONSTRAINT dispatch_due_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text, 'conflict'::text]))),
    CONSTRAINT dispatch_due_pkey PRIMARY KEY (id),
    CONSTRAINT dispatch_due_run_id_record_id_version_key UNIQUE (run_id, record_id, version),
    CONSTRAINT dispatch_due_record_id_fkey FOREIGN KEY (record_id) REFERENCES records(id),
    CONSTRAINT dispatch_due_run_id_fkey FOREIGN KEY (run_id) REFERENCES dispatch_runs(id)
)
WITH (fillfactor='40');
CREATE INDEX dispatch_due_order ON dispatch_due USING btree (run_id, round, id);

-- The ledger: one durable row per line key, whatever run sent it. request_hash
-- is the SHA-256 of line, the line object exactly as sent; the primary key
-- makes (key, request_hash) unique together, and a line that would go out
-- under an existing key with another hash is recorded in dispatch_conflicts
-- instead of being sent.
CREATE TABLE dispatch_ledger (
    key text NOT NULL,
    request_hash bytea NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    version integer NOT NULL,
    record_id bigint NOT NULL,
    line bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_detail text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    CONSTRAINT dispatch_ledger_request_hash_check CHECK ((length(request_hash) = 32)),
    CONSTRAINT dispatch_ledger_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text]))),
    CONSTRAINT dispatch_ledger_pkey PRIMARY KEY (key)
)
WITH (fillfactor='50');

-- Settled ledger rows older than 90 days, moved here once a day. Still
-- consulted: an archived key is never sent again.
CREATE TABLE dispatch_ledger_archive (
    key text NOT NULL,
    request_hash bytea NOT NULL,
    partner_id text NOT NULL,
    pay_period text NOT NULL,
    employee_id text NOT NULL,
    employee_ref text NOT NULL,
    component text NOT NULL,
    version integer NOT NULL,
    record_id bigint NOT NULL,
    line bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_detail text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    archived_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispatch_ledger_request_hash_check CHECK ((length(request_hash) = 32)),
    CONSTRAINT dispatch_ledger_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text]))),
    CONSTRAINT dispatch_ledger_archive_pkey PRIMARY KEY (key)
);
CREATE INDEX dispatch_ledger_archive_record ON dispatch_ledger_archive USING btree (record_id, version);

-- A line that would have been sent under an existing key with another request
-- hash: a bug, never routine. Shown by `dispatch status`.
CREATE TABLE dispatch_conflicts (
    id bigserial NOT NULL,
    key text NOT NULL,
    run_id bigint NOT NULL,
    stored_hash bytea NOT NULL,
    request_hash bytea NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispatch_conflicts_key_request_hash_run_id_key UNIQUE (key, request_hash, run_id),
    CONSTRAINT dispatch_conflicts_pkey PRIMARY KEY (id),
    CONSTRAINT dispatch_conflicts_run_id_fkey FOREIGN KEY (run_id) REFERENCES dispatch_runs(id)
);

-- dispatch_generation is the run number a partner's period is at: 1 + how
-- often it was unlocked.
-- +goose StatementBegin
CREATE FUNCTION dispatch_generation(p text, pp text) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT 1 + count(*)::integer FROM lock_events WHERE partner_id = p AND pay_period = pp AND action = 'unlock'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dispatch_open_run(p text, pp text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    tgt text;
    gen integer;
    rid bigint;
    n integer;
    prior bigint[];
BEGIN
    SELECT dispatch_target INTO tgt FROM partners WHERE id = p;
    IF tgt IS NULL OR NOT EXISTS (SELECT 1 FROM period_locks WHERE partner_id = p AND pay_period = pp AND reason = 'approved') THEN
        RETURN NULL;
    END IF;
    gen := dispatch_generation(p, pp);
    INSERT INTO dispatch_runs (partner_id, pay_period, run, target) VALUES (p, pp, gen, tgt)
        ON CONFLICT (partner_id, pay_period, run) DO NOTHING RETURNING id INTO rid;
    IF rid IS NULL THEN
        RETURN (SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND run = gen);
    END IF;
    prior := ARRAY(SELECT id FROM dispatch_runs WHERE partner_id = p AND pay_period = pp AND id <> rid);
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, r.id, r.version, coalesce(e.employee_id, derived_employee_id(r.partner_id, r.employee_ref)), r.employee_ref,
        r.component, r.amount::text, r.currency, r.hours::text, r.rate::text, to_char(r.pay_date, 'YYYY-MM-DD')
    FROM records r LEFT JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
    WHERE r.partner_id = p AND r.pay_period = pp
      AND (cardinality(prior) = 0 OR NOT EXISTS (SELECT 1 FROM dispatch_due d
               WHERE d.run_id = ANY (prior) AND d.record_id = r.id AND d.version = r.version AND d.state IN ('succeeded', 'failed')))
      AND NOT EXISTS (SELECT 1 FROM dispatch_ledger_archive l WHERE l.record_id = r.id AND l.version = r.version)
    ORDER BY r.employee_ref, r.component;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE dispatch_runs SET total = n, state = CASE WHEN n = 0 THEN 'complete' ELSE 'in_progress' END,
        completed_at = CASE WHEN n = 0 THEN now() END
    WHERE id = rid;
    RETURN rid;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dispatch_on_lock() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.reason = 'approved' THEN
        PERFORM dispatch_open_run(NEW.partner_id, NEW.pay_period);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER period_locks_dispatch AFTER INSERT OR UPDATE ON period_locks FOR EACH ROW EXECUTE FUNCTION dispatch_on_lock();

-- A new version of a record in a period whose current lock has a run (an
-- approved exception) is due in that run.
-- +goose StatementBegin
CREATE FUNCTION dispatch_on_version() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    rid bigint;
BEGIN
    SELECT id INTO rid FROM dispatch_runs
    WHERE partner_id = NEW.partner_id AND pay_period = NEW.pay_period AND run = dispatch_generation(NEW.partner_id, NEW.pay_period);
    IF rid IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO dispatch_due (run_id, record_id, version, employee_id, employee_ref, component, amount, currency, hours, rate, pay_date)
    SELECT rid, NEW.id, NEW.version, coalesce(e.employee_id, derived_employee_id(NEW.partner_id, NEW.employee_ref)), NEW.employee_ref,
        NEW.component, NEW.amount::text, NEW.currency, NEW.hours::text, NEW.rate::text, to_char(NEW.pay_date, 'YYYY-MM-DD')
    FROM (SELECT 1) one LEFT JOIN employees e ON e.partner_id = NEW.partner_id AND e.employee_ref = NEW.employee_ref
    ON CONFLICT (run_id, record_id, version) DO NOTHING;
    IF FOUND THEN
        UPDATE dispatch_runs SET total = total + 1, state = 'in_progress', completed_at = NULL, updated_at = now()
        WHERE id = rid;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER records_dispatch_insert AFTER INSERT ON records FOR EACH ROW WHEN ((new.locked_reason IS NOT NULL)) EXECUTE FUNCTION dispatch_on_version();

CREATE TRIGGER records_dispatch_version AFTER UPDATE ON records FOR EACH ROW WHEN (((new.locked_reason IS NOT NULL) AND (new.version <> old.version))) EXECUTE FUNCTION dispatch_on_version();

-- ================================================================================================
-- Notifications to partners: the outbox
-- ================================================================================================

-- One row per business event: the outbox of the notifications. It is written
-- by the triggers below in the very transaction that makes the result or the
-- report durable, so one cannot commit without the other. (event_type,
-- subject) is the business event (subject: the envelope id for
-- submission.processed and review.completed, the replay id for
-- replay.processed); its uniqueness means a repeat never creates a second
-- event. webhook_id is derived from it and is sent unchanged on every attempt;
-- payload is the exact body, built once, so every attempt sends the same bytes.
--   state           pending (due at next_attempt_at), delivered, failed (retries
--                   exhausted, or an answer that is not retried; `notify redeliver`)
--   attempts        every attempt ever made; round_attempts: since the event was
--                   created or last redelivered (the retry budget counts these)
--   next_attempt_at when a pending event is due; a claimed attempt pushes it past
--                   its timeout, so an attempt cut off by a crash is made again
CREATE TABLE notify_events (
    id bigserial NOT NULL,
    partner_id text NOT NULL,
    event_type text NOT NULL,
    subject bigint NOT NULL,
    webhook_id text NOT NULL,
    payload text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    round_attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_status integer,
    last_error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    CONSTRAINT notify_events_event_type_check CHECK ((event_type = ANY (ARRAY['submission.processed'::text, 'replay.processed'::text, 'review.completed'::text]))),
    CONSTRAINT notify_events_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text]))),
    CONSTRAINT notify_events_event_type_subject_key UNIQUE (event_type, subject),
    CONSTRAINT notify_events_pkey PRIMARY KEY (id),
    CONSTRAINT notify_events_webhook_id_key UNIQUE (webhook_id),
    CONSTRAINT notify_events_partner_id_fkey FOREIGN KEY (partner_id) REFERENCES partners(id)
);
CREATE INDEX notify_events_due ON notify_events USING btree (next_attempt_at, id) WHERE (state = 'pending'::text);
CREATE INDEX notify_events_partner ON notify_events USING btree (partner_id, id);
CREATE INDEX notify_events_partner_due ON notify_events USING btree (partner_id, next_attempt_at, id) WHERE (state = 'pending'::text);

-- The delivery log: one row per attempt (started when claimed; finished_at,
-- status and error once answered; a row never finished is an attempt cut off
-- by a crash).
CREATE TABLE notify_attempts (
    event_id bigint NOT NULL,
    attempt integer NOT NULL,
    url text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    status integer,
    error text DEFAULT ''::text NOT NULL,
    CONSTRAINT notify_attempts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT notify_attempts_pkey PRIMARY KEY (event_id, attempt),
    CONSTRAINT notify_attempts_event_id_fkey FOREIGN KEY (event_id) REFERENCES notify_events(id)
);

-- Who sent an event again, and when (`notify redeliver`).
CREATE TABLE notify_redeliveries (
    id bigserial NOT NULL,
    event_id bigint NOT NULL,
    by_whom text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT notify_redeliveries_pkey PRIMARY KEY (id),
    CONSTRAINT notify_redeliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES notify_events(id)
);

-- notify_enqueue writes the event (type t, subject s) of partner p with data
-- d, if the partner has a notify URL; a second call for the same event does
-- nothing. The body is {"type", "timestamp", "data"} (the Standard Webhooks
-- payload structure) with its keys in that order.
-- +goose StatementBegin
CREATE FUNCTION notify_enqueue(p text, t text, s bigint, d json) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (SELECT notify_url FROM partners WHERE id = p) IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO notify_events (partner_id, event_type, subject, webhook_id, payload)
    VALUES (p, t, s, 'msg_' || t || '_' || s,
        json_build_object('type', t, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', d)::text)
    ON CONFLICT (event_type, subject) DO NOTHING;
END
$$;
-- +goose StatementEnd

-- An envelope that gets its result (processed, or key_reuse: a different
-- file under a used name, rejected) is a submission.processed. A repeat of
-- the same file is a "replay" envelope sharing the first one's result: no
-- event of its own.
-- +goose StatementBegin
CREATE FUNCTION notify_on_envelope() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'submission.processed', NEW.id, json_build_object(
        'submission_id', NEW.id, 'name', NEW.file_name, 'source', NEW.source, 'status', NEW.status,
        'counts', coalesce(NEW.counts, '{}'::jsonb),
        'submission_url', '/v1/submissions/' || NEW.id,
        'result_url', '/v1/submissions/' || NEW.id || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.id || '/rows'));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER envelopes_notify AFTER UPDATE OF status ON envelopes FOR EACH ROW WHEN (((old.status = 'received'::text) AND (new.status = ANY (ARRAY['processed'::text, 'key_reuse'::text])))) EXECUTE FUNCTION notify_on_envelope();

-- A leg replay's result is stored by the UPDATE that fills its counts and
-- result file (in the replay's transaction).
-- +goose StatementBegin
CREATE FUNCTION notify_on_replay() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM notify_enqueue(NEW.partner_id, 'replay.processed', NEW.id, json_build_object(
        'replay_id', NEW.id, 'submission_id', NEW.of_envelope, 'source', NEW.source, 'counts', NEW.counts,
        'submission_url', '/v1/submissions/' || NEW.of_envelope,
        'result_url', '/v1/submissions/' || NEW.of_envelope || '/result.csv',
        'rows_url', '/v1/submissions/' || NEW.of_envelope || '/rows'));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER replays_notify AFTER UPDATE OF result ON replays FOR EACH ROW WHEN (((old.result = '\x'::bytea) AND (new.result <> '\x'::bytea))) EXECUTE FUNCTION notify_on_replay();

-- A review report is written when the last open exception of a submission
-- closes (records.WriteReviewReports, in the decision's transaction).
-- +goose StatementBegin
CREATE FUNCTION notify_on_review() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    e envelopes;
BEGIN
    SELECT * INTO e FROM envelopes WHERE id = NEW.envelope_id;
    PERFORM notify_enqueue(e.partner_id, 'review.completed', e.id, json_build_object(
        'submission_id', e.id, 'name', e.file_name,
        'counts', (SELECT json_build_object(
            'approved', count(*) FILTER (WHERE status = 'approved'),
            'rejected', count(*) FILTER (WHERE status = 'rejected'),
            'superseded', count(*) FILTER (WHERE status = 'superseded'))
            FROM exceptions WHERE envelope_id = e.id),
        'submission_url', '/v1/submissions/' || e.id,
        'report_url', '/v1/submissions/' || e.id || '/review.csv'));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER envelope_reviews_notify AFTER INSERT ON envelope_reviews FOR EACH ROW EXECUTE FUNCTION notify_on_review();
