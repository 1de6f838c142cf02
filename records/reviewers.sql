-- name: AddReviewer
INSERT INTO reviewers (name, password_hash, partners) VALUES ($1, $2, $3);

-- name: SetReviewerPassword
UPDATE reviewers SET password_hash = $2 WHERE name = $1;

-- name: EndReviewerSessions
DELETE FROM reviewer_sessions WHERE reviewer = $1;

-- name: ReviewerDisabledForUpdate
SELECT disabled_at IS NOT NULL FROM reviewers WHERE name = $1 FOR UPDATE;

-- name: SetReviewerDisabled
UPDATE reviewers SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END
WHERE name = $1;

-- name: ReviewerByName
SELECT name, partners, created_at, disabled_at IS NOT NULL, password_hash FROM reviewers
WHERE name = $1 AND disabled_at IS NULL;

-- name: Reviewers
SELECT name, partners, created_at, disabled_at IS NOT NULL FROM reviewers ORDER BY name;

