-- migrate:up
-- Restoring an archive (issue 28 part 7): `archive restore FILE` puts an archived task's events
-- back, with their original ids and seals, and removes their listings in `archived_events` in
-- the same transaction, behind one sealed TASKS_RESTORED event. The append-only trigger of
-- 0007 refused every DELETE of a listing; it now lets one go only once its event is back in
-- `event_seals` with the very seal it was listed with. A hand-made DELETE of a listing whose
-- event is still archived is still refused, and `verify` holds every restored chain against the
-- TASKS_ARCHIVED event that recorded it and the TASKS_RESTORED event that brought it back.
DROP TRIGGER archived_events_refuse_delete;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
WHEN NOT EXISTS (
  SELECT 1 FROM event_seals WHERE event_id = OLD.event_id AND seal = OLD.seal
)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;

-- migrate:down
DROP TRIGGER archived_events_refuse_delete;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;
