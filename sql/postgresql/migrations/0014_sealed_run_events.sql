-- migrate:up
-- Run events sealed (issue 26), as SQLite's migration 0014: every append to a run is from now
-- on a sealed RUN_EVENT_APPENDED event covering the `run_events` row; the events appended
-- before (unsealed) are listed here, each run's last `seq` at this migration, and `verify`
-- counts those as unprovable and reports any other run event that no seal covers.
CREATE TABLE run_events_before_seals(
  run_id text PRIMARY KEY REFERENCES runs(run_id),
  last_seq bigint NOT NULL CHECK (last_seq >= 1)
);

INSERT INTO run_events_before_seals(run_id, last_seq)
SELECT run_id, max(seq) FROM run_events GROUP BY run_id;

CREATE TRIGGER run_events_before_seals_refuse_update BEFORE UPDATE ON run_events_before_seals
  FOR EACH ROW EXECUTE FUNCTION refuse_change('the run events listed before seals cannot change');
CREATE TRIGGER run_events_before_seals_refuse_delete BEFORE DELETE ON run_events_before_seals
  FOR EACH ROW EXECUTE FUNCTION refuse_change('the run events listed before seals cannot change');

-- migrate:down
DROP TABLE run_events_before_seals;
