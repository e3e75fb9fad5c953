-- The task lifecycle: inserts, the one compare-and-swap every transition uses, the claim's
-- candidates, lease expiry, the idempotency ledger and reads.

-- name: tasks_insert!
INSERT INTO tasks(
  task_id, goal, instructions, success_criteria_json, required_capabilities_json,
  constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
  claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
  result_idempotency_key, verification_json, revision, created_at, updated_at,
  verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq)
VALUES (
  :task_id, :goal, :instructions, :success_criteria_json, :required_capabilities_json,
  :constraints_json, :metadata_json, :deadline, :priority, :max_attempts, :attempt, :status,
  :claimed_by, :lease_token_hash, :lease_expires_at, :result_json, :result_digest,
  :result_idempotency_key, :verification_json, :revision, :created_at, :updated_at,
  :verification_mode, :retry_base_seconds, :retry_max_seconds, :not_before, :seq);

-- name: tasks_cas_update!
-- Every transition, in the one compare-and-swap form (core/statements.py): the row must still be
-- at the revision the decision read, and the new revision is exactly one more.
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

-- name: tasks_next_seq$
-- The creation sequence the next task gets, read under the write lock (through tasks_by_seq):
-- claims take equal-priority tasks in this order.
SELECT coalesce(max(seq), 0) + 1 FROM tasks;

-- name: tasks_claim_candidates
-- The first :limit QUEUED tasks in claim order that this claimer may take now, through
-- tasks_claim_order: the one candidate statement, with the meaning of PostgreSQL's. Attempts,
-- deadline and schedule are filtered here (timestamps are stored in one fixed format, so text
-- order is time order), and capabilities: every name of required_capabilities_json must be in
-- :offered_json (a JSON array of names); a list that is not a JSON array of names is never a
-- candidate. The core checks each candidate again.
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks INDEXED BY tasks_claim_order
WHERE status = 'QUEUED'
  AND attempt < max_attempts
  AND (deadline IS NULL OR deadline > :now)
  AND (not_before IS NULL OR not_before <= :now)
  AND CASE WHEN json_valid(required_capabilities_json)
           THEN json_type(required_capabilities_json) = 'array' ELSE 0 END
  AND NOT EXISTS (
    SELECT 1
    FROM json_each(CASE WHEN json_valid(required_capabilities_json)
                        THEN required_capabilities_json ELSE '[]' END) AS required
    WHERE required.type <> 'text'
       OR NOT EXISTS (
         SELECT 1 FROM json_each(:offered_json) AS offered WHERE offered.value = required.value))
ORDER BY priority DESC, seq
LIMIT :limit;

-- name: tasks_expired_leases
-- CLAIMED tasks whose lease has passed, oldest expiry first, through tasks_lease_expiry.
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks INDEXED BY tasks_lease_expiry
WHERE status = 'CLAIMED' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit;

-- name: tasks_list_by_status
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks INDEXED BY tasks_claim_order
WHERE status = :status
ORDER BY priority DESC, seq
LIMIT :limit;

-- name: tasks_list_all
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks
ORDER BY seq
LIMIT :limit;

-- name: task_idempotency_get^
SELECT idempotency_key, request_sha256, response_json
FROM task_idempotency WHERE idempotency_key = :idempotency_key;

-- name: task_idempotency_insert!
INSERT INTO task_idempotency(
  idempotency_key, operation, subject, request_sha256, response_json, created_at)
VALUES (:idempotency_key, :operation, :subject, :request_sha256, :response_json, :created_at);
