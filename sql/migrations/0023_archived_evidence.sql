-- migrate:up
-- Archiving a task with its evidence (issue 28 part 7): `archive` now removes a finished
-- task's evidence runs with their events and the auxiliary runs that reviewed them, after
-- writing every row to the archive file. Run events are append-only (0004); the trigger now
-- admits a DELETE of one only when the chain of its run's session (`task:T`) is listed in
-- `archived_events`, which only an archive writes (in the same transaction, before the
-- deletes) and which `verify` holds against the sealed TASKS_ARCHIVED event that records the
-- chain, and with it the count and digest of the ledger-sealed rows it removed. A hand-made
-- DELETE of a run event of any run whose task chain is not archived is still refused. The
-- index finds a chain's listings without a scan.
CREATE INDEX archived_events_by_chain ON archived_events(chain);

DROP TRIGGER run_events_refuse_delete;
CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
WHEN NOT EXISTS (SELECT 1 FROM runs AS r JOIN archived_events AS a ON a.chain = r.session_id
                 WHERE r.run_id = OLD.run_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be deleted');
END;

-- migrate:down
DROP TRIGGER run_events_refuse_delete;
CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be deleted');
END;

DROP INDEX archived_events_by_chain;
