-- name: ReplayAnswer
SELECT body_sha256, response_status, response_type, response_body FROM replays
WHERE partner_id = $1 AND of_envelope = $2 AND idem_key = $3;

-- name: CompleteReplay
UPDATE replays SET counts = $2, result = $3, response_status = $4, response_type = $5, response_body = $6
WHERE id = $1;

-- name: InsertReplay
INSERT INTO replays (partner_id, of_envelope, idem_key, source, body_sha256, body,
	counts, result, response_status, response_type, response_body)
VALUES ($1, $2, $3, $4, $5, $6, '{}', '', 0, '', '') RETURNING id;

-- name: ClaimReplayLegs
INSERT INTO replay_legs (partner_id, leg_key, of_envelope, row_no, replay_id)
SELECT $1, k, $2, r, $3 FROM unnest($4::bytea[], $5::int[]) AS u(k, r)
ON CONFLICT (partner_id, leg_key) DO UPDATE SET replay_id = EXCLUDED.replay_id WHERE NOT replay_legs.settled
RETURNING row_no;

-- name: SettleReplayLegs
UPDATE replay_legs l SET outcome = u.outcome, code = nullif(u.code, ''), result_line = u.line,
	settled = u.outcome <> 'rejected'
FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) AS u(row_no, outcome, code, line)
WHERE l.of_envelope = $1 AND l.row_no = u.row_no;

-- name: ReplayLegLines
SELECT row_no, result_line, replay_id FROM replay_legs WHERE of_envelope = $1 AND row_no = ANY($2);

-- name: ResultChunksAt
SELECT data FROM envelope_results WHERE envelope_id = $1 AND n = ANY($2) ORDER BY n;

-- name: LatestLegs
SELECT row_no, result_line, replay_id, leg_key FROM replay_legs
WHERE of_envelope = $1 AND result_line IS NOT NULL;

-- name: StoreReplayCounts
UPDATE replays SET counts = $2, result = $3 WHERE id = $1;

-- name: CloseReplayFile
UPDATE envelopes SET status = 'processed', counts = $2, result_size = $3, processed_at = now() WHERE id = $1;

