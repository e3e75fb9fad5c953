-- `aios-ledger upgrade`: reading what a 0.x ledger signed and archived, and re-sealing its log.

-- name: upgrade_archived_events$
-- How many events an archive removed and no restore put back.
SELECT count(*) FROM archived_events;

-- name: upgrade_reseal!
UPDATE event_seals
SET prev_seal = :prev_seal, seal = :seal, seal_version = :seal_version,
    row_changes = :row_changes, chained_row_digest = :chained_row_digest
WHERE event_id = :event_id;
