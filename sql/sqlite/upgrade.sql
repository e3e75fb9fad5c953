-- `aios-ledger upgrade`: a 0.x schema made the baseline's around the re-sealing of its log.

-- name: upgrade_open_log#
-- `event_seals` takes the baseline's definition and lets the re-sealing update its rows; the
-- Merkle tree and its checkpoints are emptied, to be built again. SQLite changes CHECK constraints
-- only by rebuilding the table (which its foreign keys and triggers forbid in a transaction) or
-- by writing its definition, as here; every row is v5 when the transaction commits.
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = 'CREATE TABLE event_seals(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version INTEGER NOT NULL DEFAULT 5 CHECK (seal_version = 5),
  row_changes TEXT,
  chained_row_digest TEXT,
  UNIQUE (chain, chain_seq)
)'
WHERE type = 'table' AND name = 'event_seals';
PRAGMA writable_schema = RESET;
DROP INDEX event_seals_v1;
CREATE INDEX event_seals_adopted ON event_seals(event_id) WHERE sealed_at_adoption = 1;
DROP TRIGGER IF EXISTS event_seals_refuse_update;
DROP TRIGGER IF EXISTS merkle_leaves_refuse_delete;
DELETE FROM checkpoint_cosignatures;
DELETE FROM checkpoints;
DELETE FROM merkle_leaves;
UPDATE merkle_tree SET size = NULL, frontier = x'', revision = revision + 1;

-- name: upgrade_close_log#
-- The append-only triggers back, as the baseline has them.
CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be updated');
END;
CREATE TRIGGER merkle_leaves_refuse_delete BEFORE DELETE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be deleted');
END;
