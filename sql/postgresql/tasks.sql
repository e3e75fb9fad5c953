-- Tasks: reads and guarded writes.

-- name: get_task^
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks WHERE task_id = :task_id;

-- name: get_task_for_update^
-- The task a write decides on, under its row lock until COMMIT: another writer of the same task
-- waits here and then reads what this one committed (READ COMMITTED re-reads the locked row).
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks WHERE task_id = :task_id
FOR UPDATE;

-- name: project_task_execution!
-- The projection's compare-and-swap: the task must still be at the revision the decision read
-- (every write to a task moves its revision on, so the task is exactly as the decision saw it).
UPDATE tasks
SET metadata_json = :metadata_json,
    required_capabilities_json = :required_capabilities_json,
    revision = revision + 1,
    updated_at = :updated_at
WHERE task_id = :task_id
  AND revision = :expected_revision;
