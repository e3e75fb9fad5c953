-- migrate:up
-- Restoring an archive (issue 28 part 7): `archive restore FILE` puts an archived task's events
-- back, with their original ids and seals, and removes their listings in `archived_events` in
-- the same transaction, behind one sealed TASKS_RESTORED event. The append-only trigger of
-- 0007 refused every DELETE of a listing; it now lets one go only once its event is back in
-- `events` (a restore inserts it with its seal in the same transaction; an event put back by
-- hand without one is an UNSEALED_EVENT to `verify`). A hand-made DELETE of a listing whose
-- event is still archived is still refused, and `verify` holds every restored chain against the
-- TASKS_ARCHIVED event that recorded it and the TASKS_RESTORED event that brought it back. The
-- trigger names `events`, never `event_seals`, which a migration may rebuild (0020 did: SQLite
-- refuses to rename a table over a trigger that names the one dropped).
DROP TRIGGER archived_events_refuse_delete;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
WHEN NOT EXISTS (SELECT 1 FROM events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;

-- migrate:down
DROP TRIGGER archived_events_refuse_delete;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;
