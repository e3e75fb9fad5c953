-- The task lifecycle: the one compare-and-swap every transition uses, the claim, leases, reads.

-- fragment: claimable_task
-- A task a claimer could take now, but for its capabilities and not_before.
status = 'QUEUED'
  AND awaiting_projection = 0
  AND attempt < max_attempts
  AND (deadline IS NULL OR deadline > :now)

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

-- name: tasks_list_by_status
SELECT {{task_columns}}
FROM {{tasks_in_claim_order}}
WHERE status = :status
ORDER BY priority DESC, seq
LIMIT :limit;

-- name: tasks_page
-- returns: TaskRow
-- One page of the task list, newest first before the cursor's :after_seq, the page and one
-- more; read backwards down tasks_by_seq, never below :floor_seq (0: no bound).
SELECT {{task_columns}}
FROM {{tasks_by_seq}}
WHERE seq < :after_seq
  AND seq >= :floor_seq
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_page_of_status
-- returns: TaskRow
-- tasks_page for a status few tasks have: its rows of tasks_claim_order, not all of tasks_by_seq.
SELECT {{task_columns}}
FROM {{tasks_in_claim_order}}
WHERE status = :status
  AND seq < :after_seq
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_agent$
-- How many claims :agent made, up to :bound + 1: no fewer than the tasks it held.
SELECT count(*) FROM (
  SELECT 1 FROM {{claims_by_agent}}
  WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent
  LIMIT :bound + 1) AS counted;

-- name: tasks_count_of_created$
-- How many tasks were created in the page's range, up to :bound + 1 (a missing end is open).
SELECT count(*) FROM (
  SELECT 1 FROM {{tasks_by_created}}
  WHERE created_at >= coalesce(CAST(:created_from AS text), '0000')
    AND created_at <= coalesce(CAST(:created_to AS text), '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_created
-- returns: TaskRow
-- tasks_page for a created range few tasks fall in: through tasks_by_created, sorted by seq.
SELECT {{task_columns}}
FROM {{tasks_by_created}}
WHERE created_at >= coalesce(CAST(:created_from AS text), '0000')
  AND created_at <= coalesce(CAST(:created_to AS text), '9999')
  AND seq < :after_seq
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_updated$
-- tasks_count_of_created for the updated range (through tasks_by_updated).
SELECT count(*) FROM (
  SELECT 1 FROM {{tasks_by_updated}}
  WHERE updated_at >= coalesce(CAST(:updated_from AS text), '0000')
    AND updated_at <= coalesce(CAST(:updated_to AS text), '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_updated
-- returns: TaskRow
-- tasks_page for an updated range few tasks fall in: through tasks_by_updated, sorted by seq.
SELECT {{task_columns}}
FROM {{tasks_by_updated}}
WHERE updated_at >= coalesce(CAST(:updated_from AS text), '0000')
  AND updated_at <= coalesce(CAST(:updated_to AS text), '9999')
  AND seq < :after_seq
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_repository$
-- How many tasks a proposal in :repository names, up to :bound + 1.
SELECT count(*) FROM (
  SELECT DISTINCT task_id FROM {{proposals_by_repository}}
  WHERE repository = :repository
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_repository
-- returns: TaskRow
-- tasks_page for a repository few tasks' proposals name: those tasks by their key, sorted.
SELECT {{task_columns}}
FROM tasks
WHERE task_id IN (
    SELECT task_id FROM {{proposals_by_repository}}
    WHERE repository = :repository)
  AND seq < :after_seq
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_scan_window^
-- How far a page read in creation order may read (core/tasks/listing.py SCAN_BOUND).
SELECT (SELECT max(seq) FROM {{tasks_by_seq}} WHERE seq < :after_seq) AS top_seq,
       (SELECT min(seq) FROM {{tasks_by_seq}}) AS bottom_seq;

-- name: task_holders
-- A task's claims in order: who held each attempt and when.
SELECT agent_id, payload_json, created_at
FROM {{claims_by_task}}
WHERE event_type = 'TASK_CLAIMED' AND task_id = :task_id
ORDER BY event_id;
