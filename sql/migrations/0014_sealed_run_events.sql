-- migrate:up
-- Run events sealed (issue 26): from now on every append to a run is a sealed
-- RUN_EVENT_APPENDED event whose seal covers the `run_events` row, so that `verify` finds an
-- event rewritten in place, deleted or inserted. The events appended before (unsealed) are
-- listed here, each run's last `seq` at this migration: `verify` counts those as unprovable,
-- and reports any other run event that no seal covers. Nothing but this migration writes the
-- list. Numbered 0014 on both engines (0013 moves the repository settings into the ledger).
CREATE TABLE run_events_before_seals(
  run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
  last_seq INTEGER NOT NULL CHECK (last_seq >= 1)
);

INSERT INTO run_events_before_seals(run_id, last_seq)
SELECT run_id, max(seq) FROM run_events GROUP BY run_id;

CREATE TRIGGER run_events_before_seals_refuse_update BEFORE UPDATE ON run_events_before_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: the run events listed before seals cannot change');
END;

CREATE TRIGGER run_events_before_seals_refuse_delete BEFORE DELETE ON run_events_before_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: the run events listed before seals cannot change');
END;

-- migrate:down
DROP TRIGGER run_events_before_seals_refuse_delete;
DROP TRIGGER run_events_before_seals_refuse_update;
DROP TABLE run_events_before_seals;
