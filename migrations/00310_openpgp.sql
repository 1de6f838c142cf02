-- +goose Up

-- OpenPGP file exchange (package pgp, docs/pgp.md).

-- The platform's key pairs. The secret key is sealed (AES-256-GCM under the
-- secret key, records/sealing.go, as webhook secrets are) with the
-- fingerprint bound as additional data; a database dump alone decrypts
-- nothing. Every key not retired decrypts; the newest of them signs.
CREATE TABLE pgp_platform_keys (
    -- The order keys were added in: the newest active one signs. (An
    -- OpenPGP key's own creation time counts seconds: two keys made in one
    -- second would tie.)
    id          bigserial UNIQUE,
    fingerprint text PRIMARY KEY CHECK (fingerprint ~ '^[0-9A-F]{40,64}$'),
    algorithm   text NOT NULL,
    public_key  text NOT NULL,
    sealed      bytea NOT NULL CHECK (length(sealed) > 21),
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);

-- A partner's OpenPGP public keys, with their history: setting new keys
-- marks the others replaced, never deletes them, so an old upload's signer
-- stays named.
CREATE TABLE partner_pgp_keys (
    id          bigserial PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (id),
    fingerprint text NOT NULL CHECK (fingerprint ~ '^[0-9A-F]{40,64}$'),
    user_id     text NOT NULL DEFAULT '',
    public_key  text NOT NULL,
    added_at    timestamptz NOT NULL DEFAULT now(),
    replaced_at timestamptz
);
CREATE UNIQUE INDEX partner_pgp_keys_active ON partner_pgp_keys (partner_id, fingerprint) WHERE replaced_at IS NULL;

-- off: files are read as they come (an OpenPGP file is refused);
-- accept: OpenPGP files are decrypted and verified, plain ones read;
-- require: only files encrypted to the platform and signed by the partner.
ALTER TABLE partners ADD COLUMN pgp text NOT NULL DEFAULT 'off' CHECK (pgp IN ('off', 'accept', 'require'));

-- What an OpenPGP upload (or a plain one refused for want of it) was, as
-- decided when it was received: which keys, the plaintext's hash (the
-- submission's identity) or the refusal, and whether its results go back
-- sealed to the partner.
CREATE TABLE envelope_pgp (
    envelope_id      bigint PRIMARY KEY REFERENCES envelopes (id),
    armored          boolean NOT NULL DEFAULT false,
    encrypted        boolean NOT NULL,
    signed           boolean NOT NULL,
    decrypted_with   text,
    signer           text,
    plaintext_sha256 bytea,
    plaintext_size   bigint,
    refusal_code     text,
    refusal_message  text,
    seal_results     boolean NOT NULL,
    CHECK ((refusal_code IS NULL) = (plaintext_sha256 IS NOT NULL))
);

-- A result or review report sealed for its partner, stored once in chunks
-- (as envelope bytes are): the encryption is randomised, so every read
-- after the first returns these bytes, never a new encryption.
CREATE TABLE sealed_results (
    envelope_id bigint NOT NULL REFERENCES envelopes (id),
    kind        text NOT NULL CHECK (kind IN ('result', 'review')),
    recipient   text NOT NULL,
    signer      text NOT NULL,
    size        bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (envelope_id, kind)
);
CREATE TABLE sealed_result_chunks (
    envelope_id bigint NOT NULL,
    kind        text NOT NULL,
    n           integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (envelope_id, kind, n),
    FOREIGN KEY (envelope_id, kind) REFERENCES sealed_results (envelope_id, kind) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE sealed_result_chunks, sealed_results, envelope_pgp, partner_pgp_keys, pgp_platform_keys;
ALTER TABLE partners DROP COLUMN pgp;
