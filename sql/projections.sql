-- The projection ledgers: the answer recorded for each idempotency key, and registered bindings.

-- name: get_initial_projection^
SELECT idempotency_key, request_sha256, response_json
FROM task_initial_execution_projections WHERE idempotency_key = :idempotency_key;

-- name: get_source_capture_recovery^
SELECT idempotency_key, request_sha256, response_json
FROM task_source_capture_projection_recoveries WHERE idempotency_key = :idempotency_key;

-- name: get_binding^
-- returns: BindingRow
SELECT {{columns_of_governed_bindings}}
FROM governed_bindings WHERE task_id = :task_id AND job_id = :job_id;

-- name: bindings_of_task
-- returns: BindingRow
-- Every binding registered for a task, by job.
SELECT {{columns_of_governed_bindings}}
FROM governed_bindings WHERE task_id = :task_id ORDER BY job_id LIMIT 2;
