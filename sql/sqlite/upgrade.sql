-- `aios-ledger upgrade`: what of a 0.x ledger's schema is not the 1.0 baseline's.

-- name: upgrade_event_seals#
-- The seal versions `event_seals` allows become the baseline's (v5, which 1.0 writes, among
-- them) and its index of seals over no rows takes adopted seals in. SQLite changes a table's
-- CHECK constraints only by rebuilding it, which the seals' foreign keys and append-only
-- triggers forbid in a transaction, or by writing its definition, as here: the rows are the
-- same under both (the new checks only allow more), and `writable_schema=RESET` makes this
-- connection read the definition again (the index statements tell the others).
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = 'CREATE TABLE event_seals(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version INTEGER NOT NULL DEFAULT 1 CHECK (seal_version IN (1, 2, 4, 5)),
  row_changes TEXT CHECK (row_changes IS NULL OR seal_version IN (4, 5)),
  chained_row_digest TEXT CHECK (chained_row_digest IS NULL OR seal_version IN (4, 5)),
  UNIQUE (chain, chain_seq)
)'
WHERE type = 'table' AND name = 'event_seals';
PRAGMA writable_schema = RESET;
DROP INDEX event_seals_v1;
CREATE INDEX event_seals_before_rows ON event_seals(event_id) WHERE seal_version = 1 OR sealed_at_adoption = 1;
