-- migrate:up
-- Retention without breaking the proof (issue 17 item 6). `archive` exports finished tasks'
-- chains to a file, then deletes their events, seals and sealed rows in one transaction that
-- appends one sealed ledger-level TASKS_ARCHIVED event. Each deleted event is listed here
-- first, with its chain and seal, so that `verify` accounts for its id (no gap, the head keeps
-- rolling over its seal) and holds every listed chain against the TASKS_ARCHIVED event that
-- names it. The append-only triggers allow a DELETE only of a listed event: a hand-made DELETE
-- is still refused, and forging a listing needs a sealed event that `verify` would not find.
CREATE TABLE archived_events(
  event_id INTEGER PRIMARY KEY,
  archive_event_id INTEGER NOT NULL CHECK (archive_event_id > event_id),
  chain TEXT NOT NULL,
  seal TEXT NOT NULL
);

CREATE TRIGGER archived_events_refuse_update BEFORE UPDATE ON archived_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be updated');
END;

CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;

DROP TRIGGER events_refuse_delete;
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be deleted');
END;

DROP TRIGGER event_seals_refuse_delete;
CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;

DROP TRIGGER event_seal_rows_refuse_delete;
CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;

-- migrate:down
DROP TRIGGER event_seal_rows_refuse_delete;
CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;

DROP TRIGGER event_seals_refuse_delete;
CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;

DROP TRIGGER events_refuse_delete;
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be deleted');
END;

DROP TRIGGER archived_events_refuse_delete;
DROP TRIGGER archived_events_refuse_update;
DROP TABLE archived_events;
