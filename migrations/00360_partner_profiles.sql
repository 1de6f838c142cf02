-- +goose Up

-- A partner's profile (how its own export maps onto payintake's fields and
-- components), every version kept: version 1, 2, … per partner, the latest
-- the one files are read with. yaml is the file as the operator wrote it;
-- mapping is what it says, as records.PartnerProfile reads it (columns,
-- components, unknown_component, sheet, results). Who set it and when is
-- here and in the review audit.
CREATE TABLE partner_profiles (
    partner_id text NOT NULL REFERENCES partners (id),
    version    integer NOT NULL CHECK (version > 0),
    yaml       text NOT NULL,
    mapping    jsonb NOT NULL,
    set_by     text NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partner_id, version)
);

-- The profile version an envelope was read with (NULL: none, the partner
-- had no profile then, or the file was not read).
ALTER TABLE envelopes ADD COLUMN profile_version integer;

-- The format its result file is served in, as the profile asked when the
-- file was read (NULL: csv, the stored lines as they are; csv-excel: the
-- same lines after a UTF-8 BOM, each line feed as CR LF). The stored lines
-- stay csv whatever the format, and result_size is the size served.
ALTER TABLE envelopes ADD COLUMN result_format text CHECK (result_format IN ('csv-excel'));

-- +goose Down
ALTER TABLE envelopes DROP COLUMN result_format;
ALTER TABLE envelopes DROP COLUMN profile_version;
DROP TABLE partner_profiles;
