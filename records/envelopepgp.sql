-- name: InsertEnvelopePGP
INSERT INTO envelope_pgp (envelope_id, armored, encrypted, signed, decrypted_with, signer,
	plaintext_sha256, plaintext_size, refusal_code, refusal_message, seal_results)
VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7, $8, nullif($9, ''), nullif($10, ''), $11);

-- name: EnvelopePGP
SELECT armored, encrypted, signed, coalesce(decrypted_with, ''), coalesce(signer, ''),
	plaintext_sha256, coalesce(plaintext_size, 0), coalesce(refusal_code, ''), coalesce(refusal_message, ''), seal_results
FROM envelope_pgp WHERE envelope_id = $1;

-- name: AddSealedResult
INSERT INTO sealed_results (envelope_id, kind, recipient, signer, size)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING true;

-- name: SealedResultChunks
SELECT data FROM sealed_result_chunks WHERE envelope_id = $1 AND kind = $2 ORDER BY n;

-- name: SealedResult
SELECT recipient, signer, size FROM sealed_results WHERE envelope_id = $1 AND kind = $2;

-- name: ReviewsToSeal
SELECT r.envelope_id, e.file_name, r.data
FROM envelope_reviews r
JOIN envelopes e ON e.id = r.envelope_id
JOIN envelope_pgp p ON p.envelope_id = r.envelope_id AND p.seal_results
WHERE e.partner_id = $1
	AND NOT EXISTS (SELECT 1 FROM sealed_results s WHERE s.envelope_id = r.envelope_id AND s.kind = 'review')
ORDER BY r.envelope_id;
