-- +goose Up

-- The client addresses a partner may use its credentials from (SFTP keys,
-- API tokens, webhook secrets): empty means anywhere. Checked by
-- records.Store.PartnerAllowsFrom, at every door.
ALTER TABLE partners ADD COLUMN allow_from cidr[] NOT NULL DEFAULT '{}';

-- The audit trail also names a partner's refused logins and requests, with
-- the door they came through.
ALTER TABLE review_audit DROP CONSTRAINT review_audit_via_check;
ALTER TABLE review_audit ADD CONSTRAINT review_audit_via_check
    CHECK (via IN ('cli', 'api', 'console', 'sftp', 'http', 'webhook'));

-- +goose Down
DELETE FROM review_audit WHERE via IN ('sftp', 'http', 'webhook');
ALTER TABLE review_audit DROP CONSTRAINT review_audit_via_check;
ALTER TABLE review_audit ADD CONSTRAINT review_audit_via_check CHECK (via IN ('cli', 'api', 'console'));
ALTER TABLE partners DROP COLUMN allow_from;
