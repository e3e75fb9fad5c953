-- What the older runtime wrote, kept for the demo and for tools that imitate it. These run on
-- stdlib sqlite3 against the legacy tables only.

-- name: legacy_create_tables#
CREATE TABLE IF NOT EXISTS tasks(
  task_id TEXT PRIMARY KEY, goal TEXT NOT NULL, instructions TEXT NOT NULL,
  success_criteria_json TEXT NOT NULL, required_capabilities_json TEXT NOT NULL,
  constraints_json TEXT NOT NULL, metadata_json TEXT NOT NULL, deadline TEXT,
  priority INTEGER NOT NULL, max_attempts INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL, claimed_by TEXT, lease_token_hash TEXT, lease_expires_at TEXT,
  result_json TEXT, result_digest TEXT, result_idempotency_key TEXT, verification_json TEXT,
  revision INTEGER NOT NULL DEFAULT 1, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events(
  event_id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT, agent_id TEXT,
  event_type TEXT NOT NULL, payload_json TEXT NOT NULL, created_at TEXT NOT NULL
);

-- name: legacy_insert_task!
INSERT INTO tasks(task_id, goal, instructions, success_criteria_json, required_capabilities_json,
  constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status, revision,
  created_at, updated_at)
VALUES (:task_id, :goal, :instructions, :success_criteria_json, '[]', :constraints_json, '{}',
  NULL, :priority, :max_attempts, 0, 'QUEUED', 1, :created_at, :created_at);

-- name: legacy_insert_event!
INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at)
VALUES (:task_id, NULL, 'TASK_CREATED', '{}', :created_at);
