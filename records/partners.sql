-- name: AddPartner
INSERT INTO partners (id, name, delimiter, decimal_comma, date_format, currency, file_pattern, mode, unknown_employee)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: CreatePartner
INSERT INTO partners (id) VALUES ($1);

-- name: PartnerExists
SELECT EXISTS (SELECT 1 FROM partners WHERE id = $1);

-- name: RevokePartnerKeysNotListed
UPDATE partner_keys SET revoked_at = now()
WHERE partner_id = $1 AND revoked_at IS NULL AND NOT (fingerprint = ANY($2));

-- name: Partner
SELECT {{partner_columns}} FROM partners p WHERE p.id = $1;

-- name: Partners
SELECT {{partner_columns}} FROM partners p ORDER BY p.id;


-- name: PartnerAllowsFrom
SELECT cardinality(allow_from) = 0 OR $2::inet <<= ANY (allow_from), allow_from
FROM partners WHERE id = $1;
