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
-- The creation sequence the next task gets, drawn from a sequence (creations run beside other
-- writers): claims take equal-priority tasks in this order. Unique, not dense.
SELECT nextval('task_seqs');

-- name: tasks_claim_candidates
-- The first :limit QUEUED tasks in claim order that this claimer may take now (the one
-- candidate statement, with the meaning of SQLite's), through tasks_claim_order, locked for
-- it: the LIMIT is inside the CTE, with FOR UPDATE SKIP LOCKED, so concurrent claimers each
-- lock tasks of their own, as many as they take, and never wait on one another.
-- Attempts, deadline, schedule (timestamps are stored in one fixed format, so text order is
-- time order) and capabilities (:offered_json) are filtered here; the core re-checks everything.
WITH locked AS (
  SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
         constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
         claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
         result_idempotency_key, verification_json, revision, created_at, updated_at,
         verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
  FROM tasks
  WHERE status = 'QUEUED'
    AND attempt < max_attempts
    AND (deadline IS NULL OR deadline > :now)
    AND (not_before IS NULL OR not_before <= :now)
    AND capabilities_offered(required_capabilities_json, :offered_json)
  ORDER BY priority DESC, seq
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
)
SELECT * FROM locked ORDER BY priority DESC, seq;

-- name: tasks_expired_leases
-- CLAIMED tasks whose lease has passed, oldest expiry first, through tasks_lease_expiry, locked:
-- one its holder is heartbeating or completing right now is skipped, not waited for.
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks
WHERE status = 'CLAIMED' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: tasks_list_by_status
SELECT task_id, goal, instructions, success_criteria_json, required_capabilities_json,
       constraints_json, metadata_json, deadline, priority, max_attempts, attempt, status,
       claimed_by, lease_token_hash, lease_expires_at, result_json, result_digest,
       result_idempotency_key, verification_json, revision, created_at, updated_at,
       verification_mode, retry_base_seconds, retry_max_seconds, not_before, seq
FROM tasks
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
