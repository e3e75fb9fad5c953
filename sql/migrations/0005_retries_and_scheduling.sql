-- migrate:up
-- Day two of the task lifecycle: how a task's results are judged, how long it waits after a
-- failed attempt, and when it may be claimed at all. The defaults are what every existing task
-- did: a reviewer judges, nothing is scheduled.
ALTER TABLE tasks ADD COLUMN verification_mode TEXT NOT NULL DEFAULT 'reviewer'
  CHECK (verification_mode IN ('reviewer', 'auto'));
ALTER TABLE tasks ADD COLUMN retry_base_seconds INTEGER NOT NULL DEFAULT 10
  CHECK (retry_base_seconds >= 1);
ALTER TABLE tasks ADD COLUMN retry_max_seconds INTEGER NOT NULL DEFAULT 3600
  CHECK (retry_max_seconds >= 1);
-- A claim never takes a task before this moment (NULL: at once); a backoff sets it.
ALTER TABLE tasks ADD COLUMN not_before TEXT;

-- `retry` joins the operations of the idempotency ledger. SQLite cannot change a CHECK in
-- place: the table is rebuilt with the same rows.
CREATE TABLE task_idempotency_next(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL
    CHECK (operation IN ('create', 'claim', 'submit', 'verify', 'cancel', 'retry')),
  subject TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
INSERT INTO task_idempotency_next
  SELECT idempotency_key, operation, subject, request_sha256, response_json, created_at
  FROM task_idempotency;
DROP INDEX task_idempotency_by_subject;
DROP TABLE task_idempotency;
ALTER TABLE task_idempotency_next RENAME TO task_idempotency;
CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);

-- migrate:down
-- The first answers of retries go with the operation (the older schema cannot hold them).
CREATE TABLE task_idempotency_previous(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL CHECK (operation IN ('create', 'claim', 'submit', 'verify', 'cancel')),
  subject TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
INSERT INTO task_idempotency_previous
  SELECT idempotency_key, operation, subject, request_sha256, response_json, created_at
  FROM task_idempotency WHERE operation <> 'retry';
DROP INDEX task_idempotency_by_subject;
DROP TABLE task_idempotency;
ALTER TABLE task_idempotency_previous RENAME TO task_idempotency;
CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);
ALTER TABLE tasks DROP COLUMN not_before;
ALTER TABLE tasks DROP COLUMN retry_max_seconds;
ALTER TABLE tasks DROP COLUMN retry_base_seconds;
ALTER TABLE tasks DROP COLUMN verification_mode;
