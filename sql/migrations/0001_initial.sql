-- migrate:up
-- tasks and events keep exactly the shape the older runtime created, so that a database it left
-- behind is adopted in place (IF NOT EXISTS) and its own readers keep working.
CREATE TABLE IF NOT EXISTS tasks(
  task_id TEXT PRIMARY KEY,
  goal TEXT NOT NULL,
  instructions TEXT NOT NULL,
  success_criteria_json TEXT NOT NULL,
  required_capabilities_json TEXT NOT NULL,
  constraints_json TEXT NOT NULL,
  metadata_json TEXT NOT NULL,
  deadline TEXT,
  priority INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  claimed_by TEXT,
  lease_token_hash TEXT,
  lease_expires_at TEXT,
  result_json TEXT,
  result_digest TEXT,
  result_idempotency_key TEXT,
  verification_json TEXT,
  revision INTEGER NOT NULL DEFAULT 1,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS events(
  event_id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT,
  agent_id TEXT,
  event_type TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE INDEX events_by_task ON events(task_id, event_id);

CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be updated');
END;

CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be deleted');
END;

-- One seal per event: a digest over the event's content and the seal before it in its chain
-- (one chain per task, one for ledger-level events). Kept beside `events` so that the older
-- runtime's rows keep their shape and content when they are sealed at adoption.
CREATE TABLE event_seals(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  UNIQUE (chain, chain_seq)
);

CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be updated');
END;

CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;

CREATE TABLE task_initial_execution_projections(
  idempotency_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL UNIQUE REFERENCES tasks(task_id),
  job_id TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  execution_digest TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE task_source_capture_projection_recoveries(
  idempotency_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL UNIQUE REFERENCES tasks(task_id),
  job_id TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  execution_digest TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

-- Governed bindings registered by an operator; the built-in resolver projects from them.
CREATE TABLE governed_bindings(
  task_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  binding_json TEXT NOT NULL,
  binding_sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (task_id, job_id)
);

-- migrate:down
DROP TABLE governed_bindings;
DROP TABLE task_source_capture_projection_recoveries;
DROP TABLE task_initial_execution_projections;
DROP TRIGGER event_seals_refuse_delete;
DROP TRIGGER event_seals_refuse_update;
DROP TABLE event_seals;
DROP TRIGGER events_refuse_delete;
DROP TRIGGER events_refuse_update;
DROP INDEX events_by_task;
DROP TABLE events;
DROP TABLE tasks;
