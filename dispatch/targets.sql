-- The payroll vendors' batch APIs (targets.go).

-- name: InsertTarget
INSERT INTO dispatch_targets (name, url, token_file, rate_limit, chunk_size,
	max_attempts, retry_base_ms, timeout_ms, line_status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: Targets
SELECT {{target_columns}} FROM dispatch_targets ORDER BY name;

-- name: Target
SELECT {{target_columns}} FROM dispatch_targets WHERE name = $1;

-- A target no partner and no run names yet can be replaced outright.
-- name: DeleteUnusedTarget
DELETE FROM dispatch_targets WHERE name = $1
	AND NOT EXISTS (SELECT 1 FROM partners WHERE dispatch_target = $1)
	AND NOT EXISTS (SELECT 1 FROM dispatch_runs WHERE target = $1);

-- name: SetTargetURL
UPDATE dispatch_targets SET url = $2 WHERE name = $1;
