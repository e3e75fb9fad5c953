-- migrate:up
-- The idempotency ledger's operations are the rows of the core's transition table, as
-- SQLite's migration 0015: the column stops listing them (so that an operation the table
-- gains, pause and resume with this one, needs no migration of its own) and holds only an
-- operation's form of name, lower case and `_`, 1 to 64 of them.
ALTER TABLE task_idempotency DROP CONSTRAINT task_idempotency_operation_check;
ALTER TABLE task_idempotency ADD CONSTRAINT task_idempotency_operation_check
  CHECK (operation ~ '^[a-z_]{1,64}$');

-- migrate:down
-- The first answers of operations the older schema does not name (pause, resume) go with it.
DELETE FROM task_idempotency
  WHERE operation NOT IN ('create', 'claim', 'submit', 'verify', 'cancel', 'retry');
ALTER TABLE task_idempotency DROP CONSTRAINT task_idempotency_operation_check;
ALTER TABLE task_idempotency ADD CONSTRAINT task_idempotency_operation_check
  CHECK (operation = ANY (ARRAY['create', 'claim', 'submit', 'verify', 'cancel', 'retry']));
