-- `aios-ledger upgrade`: a 0.x schema made the baseline's around the re-sealing of its log.

-- name: upgrade_open_log#
-- `event_seals` lets the re-sealing update its rows (its version checks go until every row is
-- v5); the Merkle tree and its checkpoints are emptied, to be built again.
ALTER TABLE event_seals
    DROP CONSTRAINT event_seals_chained_row_check,
    DROP CONSTRAINT event_seals_seal_version_check,
    ALTER COLUMN seal_version SET DEFAULT 5;
DROP INDEX event_seals_v1;
CREATE INDEX event_seals_adopted ON event_seals USING btree (event_id) WHERE (sealed_at_adoption = 1);
ALTER TABLE event_seals DISABLE TRIGGER event_seals_refuse_update;
ALTER TABLE merkle_leaves DISABLE TRIGGER merkle_leaves_refuse_delete;
DELETE FROM checkpoint_cosignatures;
DELETE FROM checkpoints;
DELETE FROM merkle_leaves;
UPDATE merkle_tree SET size = NULL, frontier = '\x'::bytea, revision = revision + 1;

-- name: upgrade_close_log#
-- The baseline's version check, now that every seal is v5, and the append-only triggers back.
ALTER TABLE event_seals
    ADD CONSTRAINT event_seals_seal_version_check CHECK ((seal_version = 5));
ALTER TABLE event_seals ENABLE TRIGGER event_seals_refuse_update;
ALTER TABLE merkle_leaves ENABLE TRIGGER merkle_leaves_refuse_delete;
