-- name: PartnerLock
SELECT pg_advisory_xact_lock(7310, hashtext($1));

-- name: PartnerTryLock
SELECT pg_try_advisory_xact_lock(7310, hashtext($1));


-- name: TakeXactID
SELECT pg_current_xact_id();
