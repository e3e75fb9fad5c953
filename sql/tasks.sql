-- Tasks: reads and guarded writes.

-- fragment: task_columns
-- A task's columns in `TaskRow`'s field order, for every read that selects a whole task
-- (`{{task_columns}}`); `tests/test_sql_source.py` holds them to the record.
task_id, goal, instructions, success_criteria_json, required_capabilities_json,
constraints_json, metadata_json, deadline, priority, max_attempts,
attempt, status, claimed_by, lease_token_hash, lease_expires_at,
result_json, result_digest, result_idempotency_key, verification_json, revision,
created_at, updated_at, verification_mode, retry_base_seconds, retry_max_seconds,
not_before, seq, awaiting_projection

-- name: get_task^
-- returns: TaskRow
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id;

-- name: project_task_execution!
-- The projection's compare-and-swap: the task must still be at the revision the decision read
-- (every write to a task moves its revision on, so the task is exactly as the decision saw it).
-- It lifts a governed task's hold: the one write that makes such a task claimable.
UPDATE tasks
SET metadata_json = :metadata_json,
    required_capabilities_json = :required_capabilities_json,
    awaiting_projection = 0,
    revision = revision + 1,
    updated_at = :updated_at
WHERE task_id = :task_id
  AND revision = :expected_revision;
