-- migrate:up
-- Restoring an archive (issue 28 part 7), as SQLite's migration 0021: a listing in
-- `archived_events` may be deleted (TG_ARGV[1] = 'restorable') only once its event is back in
-- `events`; any other DELETE of a listing is still refused. Written to apply again alike over a ledger that has it (OR REPLACE, IF EXISTS).
CREATE OR REPLACE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'archivable'
     AND EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id) THEN
    RETURN OLD;
  END IF;
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'restorable'
     AND EXISTS (SELECT 1 FROM events WHERE event_id = OLD.event_id) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'EVENTS_APPEND_ONLY: %', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
DROP TRIGGER IF EXISTS archived_events_refuse_delete ON archived_events;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be deleted', 'restorable');

-- migrate:down
DROP TRIGGER archived_events_refuse_delete ON archived_events;
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be deleted');
CREATE OR REPLACE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'archivable'
     AND EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'EVENTS_APPEND_ONLY: %', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
