-- Notification events and their delivery log (store.go).

-- name: Events
SELECT {{event_columns}} FROM notify_events
WHERE ($1 = '' OR partner_id = $1) AND ($2 = '' OR state = $2) ORDER BY id DESC LIMIT $3;

-- name: Event
SELECT {{event_columns}} FROM notify_events WHERE id = $1;

-- name: DeliveryLog
SELECT event_id, attempt, url, started_at, finished_at, status, error
FROM notify_attempts WHERE event_id = ANY($1) ORDER BY event_id, attempt;

-- name: DueAgain
UPDATE notify_events SET state = 'pending', round_attempts = 0, next_attempt_at = $2,
	updated_at = now() WHERE id = $1;

-- name: InsertRedelivery
INSERT INTO notify_redeliveries (event_id, by_whom) VALUES ($1, $2);

-- Claiming due events ($1 now, $2 the end of the lease, $3 how many): each
-- claimed event has its attempt counted and its due time pushed past the
-- lease, and is returned with its partner's URL.
-- fragment: claim_due
UPDATE notify_events e SET attempts = e.attempts + 1, round_attempts = e.round_attempts + 1,
	next_attempt_at = $2, updated_at = now()
FROM due WHERE e.id = due.id
RETURNING e.id, e.partner_id, e.event_type, e.webhook_id, e.payload, e.attempts, e.round_attempts,
	coalesce((SELECT notify_url FROM partners p WHERE p.id = e.partner_id), '')

-- Up to $3 events due at $1, oldest first.
-- name: ClaimDue
WITH due AS (
	SELECT id FROM notify_events WHERE state = 'pending' AND next_attempt_at <= $1
	ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
{{claim_due}};

-- The oldest due event of each of up to $3 partners, the partners with the
-- oldest due events first, leaving out the partners in $4 (those with an
-- attempt in flight in this process): a partner whose receiver hangs holds
-- one delivery slot, not all of them, and every other partner's events go
-- on. (The CTE partners is nested in due: claim_due reads the partners
-- table.)
-- name: ClaimDuePerPartner
WITH due AS (
	WITH partners AS (
		SELECT partner_id, min(next_attempt_at) AS first FROM notify_events
		WHERE state = 'pending' AND next_attempt_at <= $1 AND partner_id <> ALL ($4::text[])
		GROUP BY partner_id ORDER BY first, partner_id LIMIT $3)
	SELECT ev.id FROM partners p CROSS JOIN LATERAL (
		SELECT id FROM notify_events e
		WHERE e.partner_id = p.partner_id AND e.state = 'pending' AND e.next_attempt_at <= $1
		ORDER BY e.next_attempt_at, e.id LIMIT 1 FOR UPDATE SKIP LOCKED) ev)
{{claim_due}};

-- name: InsertAttempt
INSERT INTO notify_attempts (event_id, attempt, url, started_at) VALUES ($1, $2, $3, $4);

-- name: FinishAttempt
UPDATE notify_attempts SET finished_at = $3, status = $4, error = $5
WHERE event_id = $1 AND attempt = $2;

-- Unless a later attempt was claimed meanwhile ($2 is no longer the count).
-- name: FinishEvent
UPDATE notify_events SET state = $3, next_attempt_at = $4, last_status = $5, last_error = $6,
	delivered_at = coalesce($7, delivered_at), updated_at = now()
WHERE id = $1 AND attempts = $2;
