-- The task lifecycle: the one compare-and-swap every transition uses, the claim, leases, reads.

-- name: tasks_cas_update!
-- Every transition: the row must still be at the revision the decision read.
UPDATE tasks
SET status = :status,
    attempt = :attempt,
    max_attempts = :max_attempts,
    not_before = :not_before,
    claimed_by = :claimed_by,
    lease_token_hash = :lease_token_hash,
    lease_expires_at = :lease_expires_at,
    result_json = :result_json,
    result_digest = :result_digest,
    result_idempotency_key = :result_idempotency_key,
    verification_json = :verification_json,
    revision = revision + 1,
    updated_at = :updated_at
WHERE task_id = :task_id
  AND revision = :expected_revision;

-- name: tasks_list_all
SELECT {{task_columns}}
FROM tasks
ORDER BY seq
LIMIT :limit;

-- name: task_idempotency_get^
-- returns: IdempotencyRow
SELECT idempotency_key, request_sha256, response_json
FROM task_idempotency WHERE idempotency_key = :idempotency_key;

-- name: tasks_count_of_status$
-- How many tasks have one status, up to :bound + 1 (to choose tasks_page_of_status or not).
SELECT count(*) FROM (SELECT 1 FROM tasks WHERE status = :status LIMIT :bound + 1) AS counted;
