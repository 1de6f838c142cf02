-- +goose Up

-- records_referenced_guard (00005) tested both referenced tables in one
-- expression, so PL/pgSQL planned "envelope_id = OLD.id" with a partner's
-- text id as well: deleting (or renaming) a partner that no other table
-- referenced failed with "operator does not exist: bigint = text" instead
-- of succeeding. Same guard, one branch per table.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_referenced_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    referenced boolean;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NULL;
    END IF;
    IF TG_TABLE_NAME = 'partners' THEN
        referenced := EXISTS (SELECT 1 FROM records WHERE partner_id = OLD.id::text);
    ELSE
        referenced := EXISTS (SELECT 1 FROM records WHERE envelope_id = OLD.id::bigint);
    END IF;
    IF referenced THEN
        RAISE EXCEPTION 'update or delete on table "%" violates the reference from table "records"', TG_TABLE_NAME
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (id)=(%s) is still referenced from table "records".', OLD.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION records_referenced_guard() RETURNS trigger
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
