-- PostgreSQL's texts of ../tasks_lifecycle.sql's statements that differ on SQLite, and its own.

-- name: tasks_next_seq$
-- The next task's creation sequence, from a sequence since creations run beside other
-- writers: unique, not dense.
SELECT nextval('task_seqs');

-- name: tasks_claim_candidates
-- returns: TaskRow
-- SQLite's candidates, locked with FOR UPDATE SKIP LOCKED inside the CTE's LIMIT, so
-- concurrent claimers each lock tasks of their own and never wait on one another.
WITH locked AS (
  SELECT {{task_columns}}
  FROM tasks
  WHERE status = 'QUEUED'
    AND awaiting_projection = 0
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
-- returns: TaskRow
-- CLAIMED tasks whose lease has passed, oldest expiry first, locked: one its holder is
-- working on right now is skipped, not waited for.
SELECT {{task_columns}}
FROM tasks
WHERE status = 'CLAIMED' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: tasks_list_by_status
SELECT {{task_columns}}
FROM tasks
WHERE status = :status
ORDER BY priority DESC, seq
LIMIT :limit;

-- fragment: task_page_filters
-- SQLite's filters. The agent probe is a scalar subquery, which the planner never turns into a
-- hash of all the agent's claims as it may an EXISTS under an OR.
(:agent::text IS NULL OR (
    SELECT true FROM events AS claim
    WHERE claim.event_type = 'TASK_CLAIMED' AND claim.agent_id = :agent
      AND claim.task_id = tasks.task_id
    LIMIT 1))
  AND (:capability::text IS NULL
       OR strpos(required_capabilities_json, '"' || :capability || '"') > 0)
  AND (:repository::text IS NULL OR EXISTS (
        SELECT 1 FROM task_proposals AS proposal
        WHERE proposal.task_id = tasks.task_id AND proposal.repository = :repository))
  AND (:created_from::text IS NULL OR created_at >= :created_from)
  AND (:created_to::text IS NULL OR created_at <= :created_to)
  AND (:updated_from::text IS NULL OR updated_at >= :updated_from)
  AND (:updated_to::text IS NULL OR updated_at <= :updated_to)
  AND (:search::text IS NULL OR task_id = :search OR strpos(lower(goal), :search_lower) > 0)

-- name: tasks_page
-- returns: TaskRow
-- One page of the task list, with the meaning of SQLite's text.
SELECT {{task_columns}}
FROM tasks
WHERE seq < :after_seq
  AND seq >= :floor_seq
  AND (:status::text IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_page_of_status
-- returns: TaskRow
-- tasks_page for a status few tasks have: its rows of tasks_claim_order.
SELECT {{task_columns}}
FROM tasks
WHERE status = :status
  AND seq < :after_seq
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_agent$
-- How many claims :agent made, up to :bound + 1: no fewer than the tasks it held.
SELECT count(*) FROM (
  SELECT 1 FROM events
  WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_agent
-- returns: TaskRow
-- tasks_page for an agent that held few tasks: its claims, each task by its key.
SELECT {{task_columns}}
FROM tasks
WHERE task_id IN (
    SELECT task_id FROM events
    WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent)
  AND seq < :after_seq
  AND (:status::text IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_created$
-- How many tasks were created in the page's range, up to :bound + 1 (a missing end is open).
SELECT count(*) FROM (
  SELECT 1 FROM tasks
  WHERE created_at >= coalesce(:created_from::text, '0000') AND created_at <= coalesce(:created_to::text, '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_created
-- returns: TaskRow
-- tasks_page for a created range few tasks fall in: through tasks_by_created, sorted by seq.
SELECT {{task_columns}}
FROM tasks
WHERE created_at >= coalesce(:created_from::text, '0000') AND created_at <= coalesce(:created_to::text, '9999')
  AND seq < :after_seq
  AND (:status::text IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_updated$
-- tasks_count_of_created for the updated range (through tasks_by_updated).
SELECT count(*) FROM (
  SELECT 1 FROM tasks
  WHERE updated_at >= coalesce(:updated_from::text, '0000') AND updated_at <= coalesce(:updated_to::text, '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_updated
-- returns: TaskRow
-- tasks_page for an updated range few tasks fall in: through tasks_by_updated, sorted by seq.
SELECT {{task_columns}}
FROM tasks
WHERE updated_at >= coalesce(:updated_from::text, '0000') AND updated_at <= coalesce(:updated_to::text, '9999')
  AND seq < :after_seq
  AND (:status::text IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_repository$
-- How many tasks a proposal in :repository names, up to :bound + 1.
SELECT count(*) FROM (
  SELECT DISTINCT task_id FROM task_proposals
  WHERE repository = :repository
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_repository
-- returns: TaskRow
-- tasks_page for a repository few tasks' proposals name: those tasks by their key, sorted.
SELECT {{task_columns}}
FROM tasks
WHERE task_id IN (
    SELECT task_id FROM task_proposals
    WHERE repository = :repository)
  AND seq < :after_seq
  AND (:status::text IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_scan_window^
-- How far a page read in creation order may read (core/tasks/listing.py SCAN_BOUND).
SELECT (SELECT max(seq) FROM tasks WHERE seq < :after_seq) AS top_seq,
       (SELECT min(seq) FROM tasks) AS bottom_seq;

-- name: task_holders
-- A task's claims in order, through events_claims_by_task, with the meaning of SQLite's.
SELECT agent_id, payload_json, created_at
FROM events
WHERE event_type = 'TASK_CLAIMED' AND task_id = :task_id
ORDER BY event_id;

-- name: task_last_holders
-- The agent of the last claim of each task of :task_ids_json (a page's ids).
SELECT listed.task_id,
       (SELECT agent_id FROM events
        WHERE event_type = 'TASK_CLAIMED' AND task_id = listed.task_id
        ORDER BY event_id DESC LIMIT 1) AS last_holder
FROM jsonb_array_elements_text(CAST(:task_ids_json AS jsonb)) AS listed(task_id);
