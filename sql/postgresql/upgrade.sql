-- `aios-ledger upgrade`: what of a 0.x ledger's schema is not the 1.0 baseline's.

-- name: upgrade_event_seals#
-- The seal versions `event_seals` allows become the baseline's (v5, which 1.0 writes, among
-- them) and its index of seals over no rows takes adopted seals in.
ALTER TABLE event_seals
    DROP CONSTRAINT event_seals_chained_row_check,
    DROP CONSTRAINT event_seals_seal_version_check;
ALTER TABLE event_seals
    ADD CONSTRAINT event_seals_chained_row_check CHECK (((seal_version = ANY (ARRAY[4, 5])) OR ((row_changes IS NULL) AND (chained_row_digest IS NULL)))),
    ADD CONSTRAINT event_seals_seal_version_check CHECK ((seal_version = ANY (ARRAY[1, 2, 3, 4, 5])));
DROP INDEX event_seals_v1;
CREATE INDEX event_seals_before_rows ON event_seals USING btree (event_id) WHERE ((seal_version = 1) OR (sealed_at_adoption = 1));
