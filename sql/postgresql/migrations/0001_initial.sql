-- migrate:up
-- The ledger as SQLite's migrations 0001 to 0008 leave it, in the schema the connection's
-- search_path names first (default aios_ledger): every name here is unqualified, so the same
-- file serves any schema, applied by `aios-ledger migrate` or by dbmate (?search_path=...).
-- Columns keep SQLite's names, order and values (INTEGER -> bigint, TEXT -> text), so rows
-- digest alike on both engines and a ledger copies across unchanged.

CREATE TABLE tasks(
  task_id text PRIMARY KEY,
  goal text NOT NULL,
  instructions text NOT NULL,
  success_criteria_json text NOT NULL,
  required_capabilities_json text NOT NULL,
  constraints_json text NOT NULL,
  metadata_json text NOT NULL,
  deadline text,
  priority bigint NOT NULL,
  max_attempts bigint NOT NULL,
  attempt bigint NOT NULL DEFAULT 0,
  status text NOT NULL,
  claimed_by text,
  lease_token_hash text,
  lease_expires_at text,
  result_json text,
  result_digest text,
  result_idempotency_key text,
  verification_json text,
  revision bigint NOT NULL DEFAULT 1,
  created_at text NOT NULL,
  updated_at text NOT NULL,
  verification_mode text NOT NULL DEFAULT 'reviewer'
    CHECK (verification_mode IN ('reviewer', 'auto')),
  retry_base_seconds bigint NOT NULL DEFAULT 10 CHECK (retry_base_seconds >= 1),
  retry_max_seconds bigint NOT NULL DEFAULT 3600 CHECK (retry_max_seconds >= 1),
  not_before text,
  seq bigint CHECK (seq >= 1)
);
CREATE UNIQUE INDEX tasks_by_seq ON tasks(seq);
CREATE INDEX tasks_claim_order ON tasks(status, priority DESC, seq);
CREATE INDEX tasks_lease_expiry ON tasks(status, lease_expires_at);

-- Event ids are the ledger's own (the core seals events over them), not a sequence: a sequence
-- leaves gaps when a writer rolls back, and the verifier reads a gap as a removed event. The
-- counter row keeps the last id handed out, as SQLite's AUTOINCREMENT does, so that an archived
-- (deleted) event's id is never handed out again.
CREATE TABLE events(
  event_id bigint PRIMARY KEY CHECK (event_id >= 1),
  task_id text,
  agent_id text,
  event_type text NOT NULL,
  payload_json text NOT NULL,
  created_at text NOT NULL
);
CREATE INDEX events_by_task ON events(task_id, event_id);

CREATE TABLE event_id_counter(
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  last_event_id bigint NOT NULL CHECK (last_event_id >= 0)
);
INSERT INTO event_id_counter(only_row, last_event_id) VALUES (true, 0);

CREATE TABLE event_seals(
  event_id bigint PRIMARY KEY REFERENCES events(event_id),
  chain text NOT NULL,
  chain_seq bigint NOT NULL CHECK (chain_seq >= 1),
  prev_seal text NOT NULL,
  seal text NOT NULL,
  sealed_at_adoption bigint NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version bigint NOT NULL DEFAULT 1 CHECK (seal_version IN (1, 2)),
  -- The backstop: a second event at one position of a chain is an error, never a fork.
  UNIQUE (chain, chain_seq)
);
CREATE INDEX event_seals_v1 ON event_seals(event_id) WHERE seal_version = 1;

CREATE TABLE event_seal_rows(
  event_id bigint NOT NULL REFERENCES event_seals(event_id),
  position bigint NOT NULL CHECK (position >= 1),
  row_table text NOT NULL,
  row_key text NOT NULL,
  row_digest text NOT NULL,
  PRIMARY KEY (event_id, position)
);
CREATE INDEX event_seal_rows_by_row ON event_seal_rows(row_table, row_key, event_id);

CREATE TABLE archived_events(
  event_id bigint PRIMARY KEY,
  archive_event_id bigint NOT NULL CHECK (archive_event_id > event_id),
  chain text NOT NULL,
  seal text NOT NULL
);

CREATE TABLE task_idempotency(
  idempotency_key text PRIMARY KEY,
  operation text NOT NULL
    CHECK (operation IN ('create', 'claim', 'submit', 'verify', 'cancel', 'retry')),
  subject text NOT NULL,
  request_sha256 text NOT NULL,
  response_json text NOT NULL,
  created_at text NOT NULL
);
CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);

CREATE TABLE task_initial_execution_projections(
  idempotency_key text PRIMARY KEY,
  task_id text NOT NULL UNIQUE REFERENCES tasks(task_id),
  job_id text NOT NULL,
  request_sha256 text NOT NULL,
  execution_digest text NOT NULL,
  response_json text NOT NULL,
  created_at text NOT NULL
);

CREATE TABLE task_source_capture_projection_recoveries(
  idempotency_key text PRIMARY KEY,
  task_id text NOT NULL UNIQUE REFERENCES tasks(task_id),
  job_id text NOT NULL,
  request_sha256 text NOT NULL,
  execution_digest text NOT NULL,
  response_json text NOT NULL,
  created_at text NOT NULL
);

CREATE TABLE governed_bindings(
  task_id text NOT NULL,
  job_id text NOT NULL,
  binding_json text NOT NULL,
  binding_sha256 text NOT NULL,
  created_at text NOT NULL,
  PRIMARY KEY (task_id, job_id)
);

CREATE TABLE runs(
  run_id text PRIMARY KEY,
  session_id text NOT NULL,
  prompt text NOT NULL,
  event_count bigint NOT NULL DEFAULT 0 CHECK (event_count >= 0),
  created_at text NOT NULL,
  updated_at text NOT NULL
);
CREATE INDEX runs_by_session ON runs(session_id, run_id);

CREATE TABLE run_events(
  run_id text NOT NULL REFERENCES runs(run_id),
  seq bigint NOT NULL CHECK (seq >= 1),
  kind text NOT NULL,
  payload_json text NOT NULL,
  created_at text NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE auxiliary_runs(
  aux_id text PRIMARY KEY,
  session_id text NOT NULL,
  run_id text NOT NULL,
  parent_json text NOT NULL,
  kind text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('ISOLATED')),
  state text NOT NULL
    CHECK (state IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
  spec_json text NOT NULL,
  spec_digest text NOT NULL,
  evidence_digest text NOT NULL,
  owner text NOT NULL,
  revision bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
  created_at_ms bigint NOT NULL CHECK (created_at_ms >= 0),
  updated_at_ms bigint NOT NULL,
  output_json text,
  output_digest text,
  error_code text,
  error text,
  CHECK (updated_at_ms >= created_at_ms),
  CHECK ((state = 'COMPLETED') = (output_digest IS NOT NULL AND output_json IS NOT NULL)),
  CHECK ((output_digest IS NULL) = (output_json IS NULL)),
  CHECK ((state IN ('FAILED', 'CANCELLED')) = (error IS NOT NULL AND error_code IS NOT NULL)),
  CHECK ((error IS NULL) = (error_code IS NULL))
);
CREATE INDEX auxiliary_runs_by_state ON auxiliary_runs(state, aux_id);
CREATE INDEX auxiliary_runs_by_target ON auxiliary_runs(session_id, run_id, aux_id);

-- The id counter moves on to the transaction's last event at its COMMIT: the trigger is
-- deferred, and only its first firing writes the row (the others find it there already). One
-- write per transaction, not per event: a batch of 10,000 events does not leave 10,000 versions
-- of the counter row for every later reader to step over.
CREATE FUNCTION events_count_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE event_id_counter SET last_event_id = (SELECT max(event_id) FROM events)
  WHERE last_event_id < NEW.event_id;
  RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER events_count_id AFTER INSERT ON events
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION events_count_id();

-- Append-only tables, as SQLite's triggers: TG_ARGV[0] is the message; a table whose rows go
-- with an archived event (TG_ARGV[1] = 'archivable') lets a listed event's rows be deleted.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'archivable'
     AND EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'EVENTS_APPEND_ONLY: %', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('events cannot be updated');
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('events cannot be deleted', 'archivable');
CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
  FOR EACH ROW EXECUTE FUNCTION refuse_change('seals cannot be updated');
CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
  FOR EACH ROW EXECUTE FUNCTION refuse_change('seals cannot be deleted', 'archivable');
CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows
  FOR EACH ROW EXECUTE FUNCTION refuse_change('sealed rows cannot be updated');
CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
  FOR EACH ROW EXECUTE FUNCTION refuse_change('sealed rows cannot be deleted', 'archivable');
CREATE TRIGGER archived_events_refuse_update BEFORE UPDATE ON archived_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be updated');
CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be deleted');
CREATE TRIGGER run_events_refuse_update BEFORE UPDATE ON run_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be updated');
CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be deleted');

CREATE FUNCTION tasks_seq_required() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.seq IS NULL THEN
    RAISE EXCEPTION 'TASK_SEQ_REQUIRED: a task needs its creation sequence'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER tasks_seq_required BEFORE INSERT OR UPDATE OF seq ON tasks
  FOR EACH ROW EXECUTE FUNCTION tasks_seq_required();

-- migrate:down
DROP TABLE auxiliary_runs, run_events, runs, governed_bindings,
  task_source_capture_projection_recoveries, task_initial_execution_projections,
  task_idempotency, archived_events, event_seal_rows, event_seals, event_id_counter, events,
  tasks;
DROP FUNCTION tasks_seq_required(), refuse_change(), events_count_id();
