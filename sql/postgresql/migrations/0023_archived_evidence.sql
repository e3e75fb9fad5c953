-- migrate:up
-- Archiving a task with its evidence (issue 28 part 7), as SQLite's migration 0023: a run
-- event may be deleted (TG_ARGV[1] = 'run-archivable') only when the chain of its run's
-- session is listed in `archived_events` (which only an archive writes, and `verify` holds
-- against its sealed TASKS_ARCHIVED event); any other DELETE of a run event is still refused.
-- Each inner IF reads OLD's columns only on the tables that have them (run_events has no
-- event_id). Written to apply again alike
-- over a ledger that has it (OR REPLACE, IF EXISTS).
CREATE OR REPLACE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] IN ('archivable', 'restorable') THEN
    IF TG_ARGV[1] = 'archivable'
       AND EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id) THEN
      RETURN OLD;
    END IF;
    IF TG_ARGV[1] = 'restorable'
       AND EXISTS (SELECT 1 FROM events WHERE event_id = OLD.event_id) THEN
      RETURN OLD;
    END IF;
  END IF;
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'run-archivable' THEN
    IF EXISTS (SELECT 1 FROM runs AS r JOIN archived_events AS a ON a.chain = r.session_id
               WHERE r.run_id = OLD.run_id) THEN
      RETURN OLD;
    END IF;
  END IF;
  RAISE EXCEPTION 'EVENTS_APPEND_ONLY: %', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE INDEX IF NOT EXISTS archived_events_by_chain ON archived_events(chain);
DROP TRIGGER IF EXISTS run_events_refuse_delete ON run_events;
CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be deleted', 'run-archivable');

-- migrate:down
DROP TRIGGER run_events_refuse_delete ON run_events;
CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be deleted');
DROP INDEX archived_events_by_chain;
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
