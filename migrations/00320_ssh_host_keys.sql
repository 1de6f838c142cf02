-- +goose Up

-- The SSH host keys of the SFTP door, shared by every server on this
-- database (a partner behind a load balancer sees the same keys from every
-- replica). The private key is sealed under the secret key like webhook
-- secrets (records/sealing.go), with the key's fingerprint as additional
-- data. A key is announced as `next` (clients learn it through OpenSSH's
-- hostkeys-00@openssh.com), served while `active`, and kept `retired`.
CREATE TABLE ssh_host_keys (
    id bigserial PRIMARY KEY,
    key_type text NOT NULL CHECK (key_type IN ('ssh-ed25519', 'ecdsa-sha2-nistp256', 'ssh-rsa')),
    state text NOT NULL CHECK (state IN ('next', 'active', 'retired')),
    fingerprint text NOT NULL UNIQUE CHECK (fingerprint LIKE 'SHA256:%'),
    public_key bytea NOT NULL,
    sealed bytea NOT NULL CHECK (length(sealed) > 21),
    origin text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    activated_at timestamptz,
    retired_at timestamptz,
    CHECK ((state = 'active') <= (activated_at IS NOT NULL)),
    CHECK ((state = 'retired') = (retired_at IS NOT NULL))
);

-- One key of each type in each live state: the servers that start at once on
-- an empty database each try to add their keys, and one of each type wins.
CREATE UNIQUE INDEX ssh_host_keys_one_active ON ssh_host_keys (key_type) WHERE state = 'active';
CREATE UNIQUE INDEX ssh_host_keys_one_next ON ssh_host_keys (key_type) WHERE state = 'next';

-- +goose Down
DROP TABLE ssh_host_keys;
