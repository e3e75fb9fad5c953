-- migrate:up
-- The claim order (DESIGN.md "Tasks"): larger priority first, then created_at, then task_id,
-- among tasks of one status. The claim walks this index and never scans `tasks`.
CREATE INDEX tasks_claim_order ON tasks(status, priority DESC, created_at, task_id);

-- Expiring leases: CLAIMED tasks in lease-expiry order.
CREATE INDEX tasks_lease_expiry ON tasks(status, lease_expires_at);

-- The first answer given for each idempotency key of the task lifecycle (create, claim, submit,
-- verify, cancel). Keys are global: a key used for one operation and subject conflicts with any
-- other use. `subject` is the task the answer is about; `response_json` never holds a lease
-- token (the ledger keeps only its sha256, on the task row).
CREATE TABLE task_idempotency(
  idempotency_key TEXT PRIMARY KEY,
  operation TEXT NOT NULL CHECK (operation IN ('create', 'claim', 'submit', 'verify', 'cancel')),
  subject TEXT NOT NULL,
  request_sha256 TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE INDEX task_idempotency_by_subject ON task_idempotency(subject, operation);

-- migrate:down
DROP INDEX task_idempotency_by_subject;
DROP TABLE task_idempotency;
DROP INDEX tasks_lease_expiry;
DROP INDEX tasks_claim_order;
