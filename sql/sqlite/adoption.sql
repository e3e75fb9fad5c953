-- The adoption of the older runtime's database: its tables are set aside and their rows copied
-- into the ledger's with their ids and texts as written, so its events' seals verify.

-- name: legacy_adopt_set_aside#
ALTER TABLE tasks RENAME TO legacy_tasks;
ALTER TABLE events RENAME TO legacy_events;

-- name: legacy_adopt_copy#
-- Task times are respelled to the ledger's one form (text order is time order) and `seq`
-- numbers tasks in creation order. Events keep their texts.
INSERT INTO tasks(
  task_id, goal, instructions, success_criteria_json, required_capabilities_json,
  constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status, claimed_by,
  lease_token_hash, lease_expires_at, result_json, result_digest, result_idempotency_key,
  verification_json, revision, created_at, updated_at, seq)
SELECT
  task_id, goal, instructions, success_criteria_json, required_capabilities_json,
  constraints_json, metadata_json,
  CASE WHEN length(deadline) = 20 THEN substr(deadline, 1, 19) || '.000Z' ELSE deadline END,
  priority, max_attempts, attempt, status, claimed_by, lease_token_hash,
  CASE WHEN length(lease_expires_at) = 20
    THEN substr(lease_expires_at, 1, 19) || '.000Z' ELSE lease_expires_at END,
  result_json, result_digest, result_idempotency_key, verification_json, revision,
  CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END,
  CASE WHEN length(updated_at) = 20 THEN substr(updated_at, 1, 19) || '.000Z' ELSE updated_at END,
  row_number() OVER (
    ORDER BY
      CASE WHEN length(created_at) = 20 THEN substr(created_at, 1, 19) || '.000Z' ELSE created_at END,
      (SELECT min(event_id) FROM legacy_events WHERE legacy_events.task_id = legacy_tasks.task_id),
      rowid
  )
FROM legacy_tasks;
INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, created_at)
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM legacy_events ORDER BY event_id;
-- The next event id goes on from the older runtime's counter, past any event it deleted.
DELETE FROM sqlite_sequence WHERE name = 'events';
UPDATE sqlite_sequence SET name = 'events' WHERE name = 'legacy_events';
DROP TABLE legacy_events;
DROP TABLE legacy_tasks;
