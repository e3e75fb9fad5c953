-- migrate:up
-- One timestamp form (issue 17 item 8): every text the ledger writes is
-- `YYYY-MM-DDTHH:MM:SS.mmmZ`, fixed width, so that text order is time order. The whole-second
-- texts (`…:SSZ`, 20 characters, the older runtime's and this ledger's before) in the mutable
-- tables are respelled to milliseconds; SQL compares them with new ones (leases, schedules).
-- Row seals digest a whole-second moment in its old spelling, so sealed rows still verify.
-- `events` and `run_events` are append-only and keep their texts as written: both are
-- ordered by id (or seq), never by time.
UPDATE tasks SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END,
  updated_at = CASE WHEN length(updated_at) = 20 THEN substr(updated_at, 1, 19) || '.000Z' ELSE updated_at END,
  deadline = CASE WHEN length(deadline) = 20 THEN substr(deadline, 1, 19) || '.000Z' ELSE deadline END,
  lease_expires_at = CASE WHEN length(lease_expires_at) = 20 THEN substr(lease_expires_at, 1, 19) || '.000Z' ELSE lease_expires_at END,
  not_before = CASE WHEN length(not_before) = 20 THEN substr(not_before, 1, 19) || '.000Z' ELSE not_before END;

UPDATE task_idempotency SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END;

UPDATE task_initial_execution_projections SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END;

UPDATE task_source_capture_projection_recoveries SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END;

UPDATE governed_bindings SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END;

UPDATE runs SET
  created_at = CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END,
  updated_at = CASE WHEN length(updated_at) = 20 THEN substr(updated_at, 1, 19) || '.000Z' ELSE updated_at END;

-- Creation order: claims took equal-priority tasks by created_at then task_id, so tasks created
-- in one second were claimed in id order. `seq` numbers tasks in the order they were created:
-- existing ones by created_at, then their first event (their creation), then rowid.
ALTER TABLE tasks ADD COLUMN seq INTEGER CHECK (seq >= 1);

UPDATE tasks SET seq = ordered.position
FROM (
  SELECT task_id, row_number() OVER (
    ORDER BY created_at,
      (SELECT min(event_id) FROM events WHERE events.task_id = tasks.task_id),
      rowid
  ) AS position
  FROM tasks
) AS ordered
WHERE ordered.task_id = tasks.task_id;

CREATE UNIQUE INDEX tasks_by_seq ON tasks(seq);

-- SQLite cannot add a NOT NULL column without a default: these keep every new row numbered.
CREATE TRIGGER tasks_seq_required_on_insert BEFORE INSERT ON tasks WHEN NEW.seq IS NULL
BEGIN
  SELECT RAISE(ABORT, 'TASK_SEQ_REQUIRED: a task needs its creation sequence');
END;

CREATE TRIGGER tasks_seq_required_on_update BEFORE UPDATE OF seq ON tasks WHEN NEW.seq IS NULL
BEGIN
  SELECT RAISE(ABORT, 'TASK_SEQ_REQUIRED: a task needs its creation sequence');
END;

DROP INDEX tasks_claim_order;
CREATE INDEX tasks_claim_order ON tasks(status, priority DESC, seq);

-- migrate:down
-- Lossy below a second: a moment with milliseconds is cut to its second.
DROP INDEX tasks_claim_order;
CREATE INDEX tasks_claim_order ON tasks(status, priority DESC, created_at, task_id);
DROP TRIGGER tasks_seq_required_on_update;
DROP TRIGGER tasks_seq_required_on_insert;
DROP INDEX tasks_by_seq;
ALTER TABLE tasks DROP COLUMN seq;

UPDATE tasks SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END,
  updated_at = CASE WHEN length(updated_at) = 24 THEN substr(updated_at, 1, 19) || 'Z' ELSE updated_at END,
  deadline = CASE WHEN length(deadline) = 24 THEN substr(deadline, 1, 19) || 'Z' ELSE deadline END,
  lease_expires_at = CASE WHEN length(lease_expires_at) = 24 THEN substr(lease_expires_at, 1, 19) || 'Z' ELSE lease_expires_at END,
  not_before = CASE WHEN length(not_before) = 24 THEN substr(not_before, 1, 19) || 'Z' ELSE not_before END;

UPDATE task_idempotency SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END;

UPDATE task_initial_execution_projections SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END;

UPDATE task_source_capture_projection_recoveries SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END;

UPDATE governed_bindings SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END;

UPDATE runs SET
  created_at = CASE WHEN length(created_at) = 24 THEN substr(created_at, 1, 19) || 'Z' ELSE created_at END,
  updated_at = CASE WHEN length(updated_at) = 24 THEN substr(updated_at, 1, 19) || 'Z' ELSE updated_at END;
