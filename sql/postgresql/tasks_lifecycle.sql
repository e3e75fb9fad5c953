-- PostgreSQL's texts of ../tasks_lifecycle.sql's statements that differ on SQLite, and its own.

-- fragment: tasks_in_claim_order
-- The tables the shared task-list reads go through (SQLite names each one's index).
tasks

-- fragment: tasks_by_seq
tasks

-- fragment: tasks_by_created
tasks

-- fragment: tasks_by_updated
tasks

-- fragment: claims_by_agent
events

-- fragment: claims_by_task
events

-- fragment: proposals_by_repository
task_proposals

-- name: tasks_next_seq$
-- The next task's creation sequence, from a sequence: creations run beside other writers.
SELECT nextval('task_seqs');

-- name: tasks_claim_candidates
-- returns: TaskRow
-- SQLite's candidates, locked with FOR UPDATE SKIP LOCKED inside the CTE's LIMIT, so
-- concurrent claimers each lock tasks of their own and never wait on one another.
WITH locked AS (
  SELECT {{task_columns}}
  FROM tasks
  WHERE {{claimable_task}}
    AND (not_before IS NULL OR not_before <= :now)
    AND capabilities_offered(required_capabilities_json, :offered_json)
  ORDER BY priority DESC, seq
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
)
SELECT * FROM locked ORDER BY priority DESC, seq;

-- name: tasks_expired_leases
-- returns: TaskRow
-- CLAIMED tasks whose lease has passed, locked: one its holder is working on is skipped.
SELECT {{task_columns}}
FROM tasks
WHERE status = 'CLAIMED' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

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

-- name: task_last_holders
-- The agent of the last claim of each task of :task_ids_json (a page's ids).
SELECT listed.task_id,
       (SELECT agent_id FROM events
        WHERE event_type = 'TASK_CLAIMED' AND task_id = listed.task_id
        ORDER BY event_id DESC LIMIT 1) AS last_holder
FROM jsonb_array_elements_text(CAST(:task_ids_json AS jsonb)) AS listed(task_id);
