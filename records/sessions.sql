-- name: CreateSession
INSERT INTO reviewer_sessions (token_hash, reviewer, kind, csrf_token, expires_at)
VALUES ($1, $2, $3, $4, $5);

-- name: SweepExpiredSessions
DELETE FROM reviewer_sessions WHERE expires_at < now();

-- name: SessionByToken
SELECT r.name, r.partners, r.created_at, r.disabled_at IS NOT NULL, s.kind, s.csrf_token, s.expires_at
FROM reviewer_sessions s JOIN reviewers r ON r.name = s.reviewer
WHERE s.token_hash = $1 AND s.kind = $2 AND s.expires_at > now() AND r.disabled_at IS NULL;

-- name: DeleteSession
DELETE FROM reviewer_sessions WHERE token_hash = $1;

