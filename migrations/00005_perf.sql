-- +goose Up

-- Throughput at scale (issue 6). Two changes, both measured with `payintake bench`.

-- 1. records' references are checked once per statement instead of once per row.
--
-- A foreign key runs one lookup (and one row lock) per inserted row and per
-- reference: two per record. For a 1,000,000-row first submission that was
-- ~6 of the ~11 seconds of the INSERT INTO records. The same guarantees, set
-- based: after every INSERT or UPDATE on records, one statement-level trigger
-- checks all new rows' partner_id and envelope_id at once (one pass over the
-- transition table for the distinct references) and takes the same FOR KEY SHARE locks a foreign key takes,
-- so a referenced partner or envelope cannot be deleted while the writing
-- transaction is open. On the referenced side, deleting a partner or an
-- envelope that records still reference, or changing its id, is refused, as
-- NO ACTION foreign keys do (nothing in payintake deletes either).
ALTER TABLE records DROP CONSTRAINT records_partner_id_fkey;
ALTER TABLE records DROP CONSTRAINT records_envelope_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION records_check_references() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    partner_ids text[];
    envelope_ids bigint[];
    n bigint;
    bad text;
BEGIN
    -- One pass over the new rows: the distinct references (usually one partner, one envelope).
    SELECT array_agg(DISTINCT k.partner_id), array_remove(array_agg(DISTINCT k.envelope_id), NULL)
    INTO partner_ids, envelope_ids
    FROM (SELECT partner_id, envelope_id FROM new_rows GROUP BY partner_id, envelope_id) k;
    PERFORM 1 FROM partners p WHERE p.id = ANY (partner_ids) FOR KEY SHARE OF p;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(partner_ids), 0) THEN
        SELECT k INTO bad FROM unnest(partner_ids) k WHERE NOT EXISTS (SELECT 1 FROM partners p WHERE p.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to partners'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (partner_id)=(%s) is not present in table "partners".', bad);
    END IF;
    PERFORM 1 FROM envelopes e WHERE e.id = ANY (envelope_ids) FOR KEY SHARE OF e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < coalesce(cardinality(envelope_ids), 0) THEN
        SELECT k::text INTO bad FROM unnest(envelope_ids) k WHERE NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k) LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "records" violates its reference to envelopes'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (envelope_id)=(%s) is not present in table "envelopes".', bad);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER records_references_insert AFTER INSERT ON records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_references();
CREATE TRIGGER records_references_update AFTER UPDATE ON records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_check_references();

-- +goose StatementBegin
CREATE FUNCTION records_referenced_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    IF TG_TABLE_NAME = 'partners' AND EXISTS (SELECT 1 FROM records WHERE partner_id = OLD.id)
        OR TG_TABLE_NAME = 'envelopes' AND EXISTS (SELECT 1 FROM records WHERE envelope_id = OLD.id) THEN
        RAISE EXCEPTION 'update or delete on table "%" violates the reference from table "records"', TG_TABLE_NAME
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (id)=(%s) is still referenced from table "records".', OLD.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER partners_referenced_by_records AFTER UPDATE OF id OR DELETE ON partners
    FOR EACH ROW EXECUTE FUNCTION records_referenced_guard();
CREATE TRIGGER envelopes_referenced_by_records AFTER UPDATE OF id OR DELETE ON envelopes
    FOR EACH ROW EXECUTE FUNCTION records_referenced_guard();

-- 2. The stored bytes of envelopes and result files are compressed with lz4
-- instead of pglz: several times faster for the same I/O saved. Servers
-- built without lz4 keep pglz.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE envelope_chunks ALTER COLUMN data SET COMPRESSION lz4;
    ALTER TABLE envelope_results ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'this PostgreSQL has no lz4; envelope bytes stay compressed with pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE envelope_chunks ALTER COLUMN data SET COMPRESSION pglz;
ALTER TABLE envelope_results ALTER COLUMN data SET COMPRESSION pglz;
DROP TRIGGER envelopes_referenced_by_records ON envelopes;
DROP TRIGGER partners_referenced_by_records ON partners;
DROP FUNCTION records_referenced_guard();
DROP TRIGGER records_references_update ON records;
DROP TRIGGER records_references_insert ON records;
DROP FUNCTION records_check_references();
ALTER TABLE records ADD FOREIGN KEY (partner_id) REFERENCES partners (id);
ALTER TABLE records ADD FOREIGN KEY (envelope_id) REFERENCES envelopes (id);
