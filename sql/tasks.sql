-- Tasks: reads and guarded writes.

-- name: get_task^
-- returns: TaskRow
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id;

-- name: project_task_execution!
-- The projection's compare-and-swap at the revision the decision read; it lifts a governed
-- task's hold, the one write that makes such a task claimable.
UPDATE tasks
SET metadata_json = :metadata_json,
    required_capabilities_json = :required_capabilities_json,
    awaiting_projection = 0,
    revision = revision + 1,
    updated_at = :updated_at
WHERE task_id = :task_id
  AND revision = :expected_revision;
