-- migrate:up
-- Seals that prove the state (issue 17 item 5). A v2 seal also covers the digest of every
-- state row its transition wrote; those digests are kept here, one row each, so that `verify`
-- can hold each current row against the last seal that wrote it (index by row). Seals written
-- before stay v1: they cover their event alone.
ALTER TABLE event_seals ADD COLUMN seal_version INTEGER NOT NULL DEFAULT 1
  CHECK (seal_version IN (1, 2));

-- Finding out whether any v1 seal is left (a row without a v2 seal is then unprovable, not
-- forged) must not walk the whole log.
CREATE INDEX event_seals_v1 ON event_seals(event_id) WHERE seal_version = 1;

CREATE TABLE event_seal_rows(
  event_id INTEGER NOT NULL REFERENCES event_seals(event_id),
  position INTEGER NOT NULL CHECK (position >= 1),
  row_table TEXT NOT NULL,
  row_key TEXT NOT NULL,
  row_digest TEXT NOT NULL,
  PRIMARY KEY (event_id, position)
);

CREATE INDEX event_seal_rows_by_row ON event_seal_rows(row_table, row_key, event_id);

CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be updated');
END;

CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;

-- migrate:down
DROP TRIGGER event_seal_rows_refuse_delete;
DROP TRIGGER event_seal_rows_refuse_update;
DROP INDEX event_seal_rows_by_row;
DROP TABLE event_seal_rows;
DROP INDEX event_seals_v1;
ALTER TABLE event_seals DROP COLUMN seal_version;
