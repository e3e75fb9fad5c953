-- migrate:up
-- The idempotency ledger's operations are the rows of the core's transition table
-- (core/tasks/transitions.py, TASK_OPERATIONS): the column stops listing them, so that an
-- operation the table gains (pause and resume, with this migration) needs no migration of its
-- own; it still holds only an operation's form of name (lower case and `_`, 1 to 64 of them),
-- the same check as PostgreSQL's 0015. SQLite cannot change a CHECK in place: the table is
-- rebuilt with the same rows.
CREATE TABLE task_idempotency_next(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL
    CHECK (length(operation) BETWEEN 1 AND 64 AND operation NOT GLOB '*[^a-z_]*'),
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
-- The first answers of operations the older schema does not name (pause, resume) go with it.
CREATE TABLE task_idempotency_previous(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL
    CHECK (operation IN ('create', 'claim', 'submit', 'verify', 'cancel', 'retry')),
  subject TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
INSERT INTO task_idempotency_previous
  SELECT idempotency_key, operation, subject, request_sha256, response_json, created_at
  FROM task_idempotency
  WHERE operation IN ('create', 'claim', 'submit', 'verify', 'cancel', 'retry');
DROP INDEX task_idempotency_by_subject;
DROP TABLE task_idempotency;
ALTER TABLE task_idempotency_previous RENAME TO task_idempotency;
CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);
