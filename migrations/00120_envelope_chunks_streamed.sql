-- +goose Up
-- An SFTP upload's bytes are copied into envelope_chunks while they arrive,
-- in the transaction that records the envelope at the clean close; its id is
-- taken from the sequence at the start and the envelope row inserted last.
-- The reference is checked at that transaction's commit (never relaxed: a
-- chunk without its envelope still cannot commit).
ALTER TABLE envelope_chunks ALTER CONSTRAINT envelope_chunks_envelope_id_fkey DEFERRABLE INITIALLY IMMEDIATE;

-- +goose Down
ALTER TABLE envelope_chunks ALTER CONSTRAINT envelope_chunks_envelope_id_fkey NOT DEFERRABLE;
