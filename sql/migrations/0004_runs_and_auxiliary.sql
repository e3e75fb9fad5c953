-- migrate:up
-- Runs of a session and their append-only events: the evidence auxiliary runs read.
CREATE TABLE runs(
  run_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  prompt TEXT NOT NULL,
  event_count INTEGER NOT NULL DEFAULT 0 CHECK (event_count >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE INDEX runs_by_session ON runs(session_id, run_id);

CREATE TABLE run_events(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  seq INTEGER NOT NULL CHECK (seq >= 1),
  kind TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TRIGGER run_events_refuse_update BEFORE UPDATE ON run_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be updated');
END;

CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be deleted');
END;

-- Auxiliary runs: one row per run, moved along the core's transition table by guarded UPDATEs
-- (each transition also appends an AUXILIARY_RUN_* event to `events`). The CHECKs keep the
-- terminal fields consistent with the state even for a DBA writing by hand.
CREATE TABLE auxiliary_runs(
  aux_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  parent_json TEXT NOT NULL,
  kind TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('ISOLATED')),
  state TEXT NOT NULL
    CHECK (state IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
  spec_json TEXT NOT NULL,
  spec_digest TEXT NOT NULL,
  evidence_digest TEXT NOT NULL,
  owner TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 1 CHECK (revision >= 1),
  created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
  updated_at_ms INTEGER NOT NULL,
  output_json TEXT,
  output_digest TEXT,
  error_code TEXT,
  error TEXT,
  CHECK (updated_at_ms >= created_at_ms),
  CHECK ((state = 'COMPLETED') = (output_digest IS NOT NULL AND output_json IS NOT NULL)),
  CHECK ((output_digest IS NULL) = (output_json IS NULL)),
  CHECK ((state IN ('FAILED', 'CANCELLED')) = (error IS NOT NULL AND error_code IS NOT NULL)),
  CHECK ((error IS NULL) = (error_code IS NULL))
);

CREATE INDEX auxiliary_runs_by_state ON auxiliary_runs(state, aux_id);
CREATE INDEX auxiliary_runs_by_target ON auxiliary_runs(session_id, run_id, aux_id);

-- migrate:down
DROP INDEX auxiliary_runs_by_target;
DROP INDEX auxiliary_runs_by_state;
DROP TABLE auxiliary_runs;
DROP TRIGGER run_events_refuse_delete;
DROP TRIGGER run_events_refuse_update;
DROP TABLE run_events;
DROP INDEX runs_by_session;
DROP TABLE runs;
