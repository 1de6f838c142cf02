-- +goose Up

-- A notifier takes the oldest due event of each partner that has none in
-- flight (ClaimDuePerPartner in notify/store.sql), so a partner whose
-- receiver hangs holds one delivery slot and never delays another partner's
-- events. This index
-- finds a partner's oldest due event without walking its delivered ones.
CREATE INDEX notify_events_partner_due ON notify_events (partner_id, next_attempt_at, id) WHERE state = 'pending';

-- +goose Down
DROP INDEX notify_events_partner_due;
