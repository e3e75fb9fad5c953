-- migrate:up
-- The aios-ledger 1.0 schema on SQLite. `tasks` and `events` begin with the older runtime's
-- columns, in its order, so that a database it left behind is adopted by copying its rows.
-- A 0.x ledger is brought here by `aios-ledger upgrade`, not by this file.

CREATE TABLE agent_scan_charges(
  charge_id TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  agent_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  bundle_sha256 TEXT NOT NULL,
  code TEXT NOT NULL,
  scan_bytes INTEGER NOT NULL CHECK (scan_bytes >= 0),
  scan_seconds REAL NOT NULL CHECK (scan_seconds >= 0),
  created_at TEXT NOT NULL
);

CREATE TABLE api_tokens(
  name TEXT PRIMARY KEY,
  roles_json TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
  status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'REVOKED')),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  capabilities_json TEXT
);

CREATE TABLE archived_events(
  event_id INTEGER PRIMARY KEY,
  archive_event_id INTEGER NOT NULL CHECK (archive_event_id > event_id),
  chain TEXT NOT NULL,
  seal TEXT NOT NULL
);

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

CREATE TABLE checkpoint_cosignatures(
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(checkpoint_id),
  witness_name TEXT NOT NULL CHECK (length(witness_name) BETWEEN 1 AND 255),
  witness_key_id TEXT NOT NULL CHECK (length(witness_key_id) = 8),
  cosigned_at INTEGER NOT NULL CHECK (cosigned_at >= 0),
  line TEXT NOT NULL,
  received_at TEXT NOT NULL,
  PRIMARY KEY (checkpoint_id, witness_name, witness_key_id)
);

CREATE TABLE checkpoints(
  checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
  origin TEXT NOT NULL CHECK (length(origin) BETWEEN 1 AND 255),
  tree_size INTEGER NOT NULL CHECK (tree_size >= 0),
  root_hash BLOB NOT NULL CHECK (length(root_hash) = 32),
  key_id TEXT NOT NULL CHECK (length(key_id) = 8),
  note TEXT NOT NULL,
  signed_at TEXT NOT NULL
);

CREATE TABLE commit_attestations(
  idempotency_key TEXT PRIMARY KEY REFERENCES governed_writes(idempotency_key),
  task_id TEXT NOT NULL,
  repository TEXT NOT NULL,
  commit_oid TEXT NOT NULL,
  keyid TEXT NOT NULL,
  note_json TEXT NOT NULL,
  provenance_sha256 TEXT NOT NULL,
  review_sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE event_seal_rows(
  event_id INTEGER NOT NULL REFERENCES event_seals(event_id),
  position INTEGER NOT NULL CHECK (position >= 1),
  row_table TEXT NOT NULL,
  row_key TEXT NOT NULL,
  row_digest TEXT NOT NULL,
  PRIMARY KEY (event_id, position)
);

CREATE TABLE event_seals(
  event_id INTEGER PRIMARY KEY REFERENCES events(event_id),
  chain TEXT NOT NULL,
  chain_seq INTEGER NOT NULL CHECK (chain_seq >= 1),
  prev_seal TEXT NOT NULL,
  seal TEXT NOT NULL,
  sealed_at_adoption INTEGER NOT NULL DEFAULT 0 CHECK (sealed_at_adoption IN (0, 1)),
  seal_version INTEGER NOT NULL DEFAULT 5 CHECK (seal_version = 5),
  row_changes TEXT,
  chained_row_digest TEXT,
  UNIQUE (chain, chain_seq)
);

CREATE TABLE events(
  event_id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT,
  agent_id TEXT,
  event_type TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  actor TEXT
);

CREATE TABLE governed_bindings(
  task_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  binding_json TEXT NOT NULL,
  binding_sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (task_id, job_id)
);

CREATE TABLE governed_repositories(
  name TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  head_branch TEXT,
  protected_json TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  secrets_baseline_json TEXT,
  secrets_baseline_sha256 TEXT,
  scan_max_bytes INTEGER NOT NULL DEFAULT 67108864 CHECK (scan_max_bytes >= 1),
  scan_max_seconds REAL NOT NULL DEFAULT 20.0 CHECK (scan_max_seconds > 0),
  allow_gitlinks INTEGER NOT NULL DEFAULT 0 CHECK (allow_gitlinks IN (0, 1)),
  agent_scan_max_bytes INTEGER NOT NULL DEFAULT 1073741824 CHECK (agent_scan_max_bytes >= 1),
  agent_scan_max_seconds REAL NOT NULL DEFAULT 600.0 CHECK (agent_scan_max_seconds > 0),
  agent_scan_window_seconds INTEGER NOT NULL DEFAULT 3600 CHECK (agent_scan_window_seconds >= 1),
  pull_request_json TEXT,
  remote_url TEXT
);

CREATE TABLE governed_writes(
  idempotency_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  proposal_id TEXT NOT NULL REFERENCES task_proposals(proposal_id),
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  ref TEXT NOT NULL,
  old_oid TEXT NOT NULL,
  new_oid TEXT NOT NULL,
  generation INTEGER NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('INTENDED', 'APPLIED', 'NOT_APPLIED', 'MOVED_BY_OTHER')),
  code TEXT,
  observed_oid TEXT,
  changed_files_json TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE merkle_leaves(
  leaf_index INTEGER PRIMARY KEY CHECK (leaf_index >= 0),
  event_id INTEGER NOT NULL UNIQUE,
  leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
  nodes BLOB NOT NULL DEFAULT x'' CHECK (length(nodes) % 32 = 0)
);

CREATE TABLE merkle_tree(
  only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
  size INTEGER CHECK (size >= 0),
  frontier BLOB NOT NULL,
  revision INTEGER NOT NULL
);

CREATE TABLE repository_settings_changes(
  idempotency_key TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  request_sha256 TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE run_events(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  seq INTEGER NOT NULL CHECK (seq >= 1),
  kind TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE run_events_before_seals(
  run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
  last_seq INTEGER NOT NULL CHECK (last_seq >= 1)
);

CREATE TABLE runs(
  run_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  prompt TEXT NOT NULL,
  event_count INTEGER NOT NULL DEFAULT 0 CHECK (event_count >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE task_idempotency(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL
    CHECK (length(operation) BETWEEN 1 AND 64 AND operation NOT GLOB '*[^a-z_]*'),
  subject TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE task_initial_execution_projections(
  idempotency_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL UNIQUE REFERENCES tasks(task_id),
  job_id TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  execution_digest TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE task_proposals(
  proposal_id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  agent_id TEXT,
  base_oid TEXT NOT NULL,
  head_oid TEXT NOT NULL,
  bundle_sha256 TEXT NOT NULL,
  bundle_bytes INTEGER NOT NULL,
  refs_json TEXT NOT NULL,
  changed_files_json TEXT NOT NULL,
  facts_json TEXT NOT NULL,
  created_at TEXT NOT NULL, scan_bytes INTEGER, scan_seconds REAL,
  UNIQUE (task_id, attempt)
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

CREATE TABLE task_spend(
  spend_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(task_id),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  agent_id TEXT,
  repository TEXT,
  day TEXT NOT NULL CHECK (length(day) = 10),
  input_tokens INTEGER NOT NULL CHECK (input_tokens >= 0),
  output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
  cost_micros INTEGER NOT NULL CHECK (cost_micros >= 0),
  cost_currency TEXT CHECK (cost_currency IS NOT NULL OR cost_micros = 0),
  over_budget INTEGER NOT NULL DEFAULT 0 CHECK (over_budget IN (0, 1)),
  created_at TEXT NOT NULL,
  UNIQUE (task_id, attempt)
);

CREATE TABLE tasks(
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
  updated_at TEXT NOT NULL,
  verification_mode TEXT NOT NULL DEFAULT 'reviewer' CHECK (verification_mode IN ('reviewer', 'auto')),
  retry_base_seconds INTEGER NOT NULL DEFAULT 10 CHECK (retry_base_seconds >= 1),
  retry_max_seconds INTEGER NOT NULL DEFAULT 3600 CHECK (retry_max_seconds >= 1),
  not_before TEXT,
  seq INTEGER CHECK (seq >= 1),
  awaiting_projection INTEGER NOT NULL DEFAULT 0 CHECK (awaiting_projection IN (0, 1))
);

CREATE TABLE writer_leases(
  lease_id TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  ref TEXT NOT NULL,
  holder TEXT,
  generation INTEGER NOT NULL CHECK (generation >= 0),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  updated_at TEXT NOT NULL,
  UNIQUE (repository, ref)
);

CREATE INDEX agent_scan_charges_by_agent ON agent_scan_charges(repository, agent_id, created_at);

CREATE INDEX archived_events_by_chain ON archived_events(chain);

CREATE INDEX auxiliary_runs_by_state ON auxiliary_runs(state, aux_id);

CREATE INDEX auxiliary_runs_by_target ON auxiliary_runs(session_id, run_id, aux_id);

CREATE INDEX checkpoints_by_size ON checkpoints(tree_size, checkpoint_id);

CREATE INDEX commit_attestations_by_commit ON commit_attestations(commit_oid, repository);

CREATE INDEX event_seal_rows_by_row ON event_seal_rows(row_table, row_key, event_id);

CREATE INDEX event_seals_adopted ON event_seals(event_id) WHERE sealed_at_adoption = 1;

CREATE INDEX events_by_task ON events(task_id, event_id);

CREATE INDEX events_claims_by_agent ON events(agent_id, task_id)
WHERE event_type = 'TASK_CLAIMED';

CREATE INDEX events_claims_by_task ON events(task_id, event_id)
WHERE event_type = 'TASK_CLAIMED';

CREATE INDEX governed_writes_by_new_oid ON governed_writes(new_oid);

CREATE INDEX governed_writes_by_task ON governed_writes(task_id);

CREATE INDEX runs_by_session ON runs(session_id, run_id);

CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);

CREATE INDEX task_proposals_by_agent ON task_proposals(repository, agent_id, created_at);

CREATE INDEX task_proposals_by_repository_task ON task_proposals(repository, task_id);

CREATE INDEX task_spend_by_day ON task_spend(day);

CREATE INDEX tasks_awaiting_projection ON tasks(seq) WHERE awaiting_projection = 1;

CREATE INDEX tasks_by_created ON tasks(created_at);

CREATE UNIQUE INDEX tasks_by_seq ON tasks(seq);

CREATE INDEX tasks_by_updated ON tasks(updated_at);

CREATE INDEX tasks_claim_order ON tasks(status, priority DESC, seq);

CREATE INDEX tasks_lease_expiry ON tasks(status, lease_expires_at);

CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events
WHEN NOT EXISTS (SELECT 1 FROM events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be deleted');
END;

CREATE TRIGGER archived_events_refuse_update BEFORE UPDATE ON archived_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: archived events cannot be updated');
END;

CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be deleted');
END;

CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: sealed rows cannot be updated');
END;

CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be deleted');
END;

CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: seals cannot be updated');
END;

CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be deleted');
END;

CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: events cannot be updated');
END;

CREATE TRIGGER merkle_leaves_refuse_delete BEFORE DELETE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be deleted');
END;

CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be updated');
END;

CREATE TRIGGER run_events_before_seals_refuse_delete BEFORE DELETE ON run_events_before_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: the run events listed before seals cannot change');
END;

CREATE TRIGGER run_events_before_seals_refuse_update BEFORE UPDATE ON run_events_before_seals
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: the run events listed before seals cannot change');
END;

CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events
WHEN NOT EXISTS (SELECT 1 FROM runs AS r JOIN archived_events AS a ON a.chain = r.session_id
                 WHERE r.run_id = OLD.run_id)
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be deleted');
END;

CREATE TRIGGER run_events_refuse_update BEFORE UPDATE ON run_events
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: run events cannot be updated');
END;

CREATE TRIGGER tasks_seq_required_on_insert BEFORE INSERT ON tasks WHEN NEW.seq IS NULL
BEGIN
  SELECT RAISE(ABORT, 'TASK_SEQ_REQUIRED: a task needs its creation sequence');
END;

CREATE TRIGGER tasks_seq_required_on_update BEFORE UPDATE OF seq ON tasks WHEN NEW.seq IS NULL
BEGIN
  SELECT RAISE(ABORT, 'TASK_SEQ_REQUIRED: a task needs its creation sequence');
END;

INSERT INTO merkle_tree(only_row, size, frontier, revision) VALUES (1, NULL, x'', 0);

-- migrate:down
-- Going back drops the ledger: refused once it holds an event (the insert below fails its
-- CHECK), so a rollback never loses what was acknowledged.
CREATE TEMP TABLE ledger_holds_no_event(
  held INTEGER NOT NULL CONSTRAINT ledger_holds_events_and_cannot_go_back CHECK (held = 0)
);
INSERT INTO ledger_holds_no_event(held) SELECT count(*) FROM events;
DROP TABLE ledger_holds_no_event;
DROP TABLE writer_leases;
DROP TABLE task_spend;
DROP TABLE task_source_capture_projection_recoveries;
DROP TABLE task_initial_execution_projections;
DROP TABLE tasks;
DROP TABLE task_idempotency;
DROP TABLE run_events_before_seals;
DROP TABLE run_events;
DROP TABLE runs;
DROP TABLE repository_settings_changes;
DROP TABLE merkle_tree;
DROP TABLE merkle_leaves;
DROP TABLE governed_bindings;
DROP TABLE event_seal_rows;
DROP TABLE event_seals;
DROP TABLE events;
DROP TABLE commit_attestations;
DROP TABLE governed_writes;
DROP TABLE task_proposals;
DROP TABLE checkpoint_cosignatures;
DROP TABLE checkpoints;
DROP TABLE auxiliary_runs;
DROP TABLE archived_events;
DROP TABLE api_tokens;
DROP TABLE agent_scan_charges;
DROP TABLE governed_repositories;
