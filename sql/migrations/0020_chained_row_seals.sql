-- migrate:up
-- v4 seals (issue 27 part 6): SQLite's seal of an event stops covering the image of its chain's
-- task row; it covers the columns the transition changed (`row_changes`, canonical JSON text)
-- and a chained row digest over the chain's previous one and those changes
-- (`chained_row_digest`), both kept in the seal's own row instead of a second row per event
-- (core/log/seals.py). The seals written before keep their versions and verify as they are; the
-- first v4 write of a task row holds every column. SQLite cannot change a CHECK in place: the
-- seals (and the sealed rows, whose key references them) are rebuilt with the same rows, the
-- sealed rows first referencing the rebuilt seals, so that no reference is ever left dangling.
CREATE TABLE event_seals_next(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version INTEGER NOT NULL DEFAULT 1 CHECK (seal_version IN (1, 2, 4)),
  row_changes TEXT CHECK (row_changes IS NULL OR seal_version = 4),
  chained_row_digest TEXT CHECK (chained_row_digest IS NULL OR seal_version = 4),
  UNIQUE (chain, chain_seq)
);
INSERT INTO event_seals_next(
  event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version)
  SELECT event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version
  FROM event_seals;
CREATE TABLE event_seal_rows_next(
  event_id INTEGER NOT NULL REFERENCES event_seals_next(event_id),
  position INTEGER NOT NULL CHECK (position >= 1),
  row_table TEXT NOT NULL,
  row_key TEXT NOT NULL,
  row_digest TEXT NOT NULL,
  PRIMARY KEY (event_id, position)
);
INSERT INTO event_seal_rows_next(event_id, position, row_table, row_key, row_digest)
  SELECT event_id, position, row_table, row_key, row_digest FROM event_seal_rows;
DROP TABLE event_seal_rows;
DROP TABLE event_seals;
ALTER TABLE event_seals_next RENAME TO event_seals;
ALTER TABLE event_seal_rows_next RENAME TO event_seal_rows;
CREATE INDEX event_seal_rows_by_row ON event_seal_rows(row_table, row_key, event_id);
CREATE INDEX event_seals_v1 ON event_seals(event_id) WHERE seal_version = 1;
CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;
CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be updated');
END;
CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;
CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be updated');
END;

-- migrate:down
-- A ledger that holds v4 seals cannot go back: the older schema has no place for them, and the
-- insert below fails on the first one (the seals are append-only; nothing is rewritten).
CREATE TABLE event_seals_previous(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version INTEGER NOT NULL DEFAULT 1 CHECK (seal_version IN (1, 2)),
  UNIQUE (chain, chain_seq)
);
INSERT INTO event_seals_previous(
  event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version)
  SELECT event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version
  FROM event_seals;
CREATE TABLE event_seal_rows_previous(
  event_id INTEGER NOT NULL REFERENCES event_seals_previous(event_id),
  position INTEGER NOT NULL CHECK (position >= 1),
  row_table TEXT NOT NULL,
  row_key TEXT NOT NULL,
  row_digest TEXT NOT NULL,
  PRIMARY KEY (event_id, position)
);
INSERT INTO event_seal_rows_previous(event_id, position, row_table, row_key, row_digest)
  SELECT event_id, position, row_table, row_key, row_digest FROM event_seal_rows;
DROP TABLE event_seal_rows;
DROP TABLE event_seals;
ALTER TABLE event_seals_previous RENAME TO event_seals;
ALTER TABLE event_seal_rows_previous RENAME TO event_seal_rows;
CREATE INDEX event_seal_rows_by_row ON event_seal_rows(row_table, row_key, event_id);
CREATE INDEX event_seals_v1 ON event_seals(event_id) WHERE seal_version = 1;
CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;
CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be updated');
END;
CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;
CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be updated');
END;
