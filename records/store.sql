-- name: PartnerLock
SELECT pg_advisory_xact_lock(7310, hashtext($1));

-- name: PartnerTryLock
SELECT pg_try_advisory_xact_lock(7310, hashtext($1));


-- name: CommitCheck
SELECT pg_logical_emit_message(true, 'payintake', 'commit check');
