-- SQLite's texts of ../tasks_lifecycle.sql's statements that differ on PostgreSQL, and its own.

-- name: tasks_next_seq$
-- The next task's creation sequence, read under the write lock: the claim order of equal
-- priorities.
SELECT coalesce(max(seq), 0) + 1 FROM tasks;

-- name: tasks_claim_candidates
-- returns: TaskRow
-- The first :limit QUEUED tasks this claimer may take now, in claim order; a capability list
-- that is not a JSON array of names never matches. The core checks each candidate again.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_claim_order
WHERE status = 'QUEUED'
  AND awaiting_projection = 0
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
-- returns: TaskRow
-- CLAIMED tasks whose lease has passed, oldest expiry first.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_lease_expiry
WHERE status = 'CLAIMED' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit;

-- name: tasks_list_by_status
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_claim_order
WHERE status = :status
ORDER BY priority DESC, seq
LIMIT :limit;

-- fragment: task_page_filters
-- A task page's filters but its status, each true when not given. A capability is matched as
-- its JSON string in the array's text: an Identifier holds no quote, so it matches one element.
(:agent IS NULL OR EXISTS (
    SELECT 1 FROM events AS claim INDEXED BY events_claims_by_agent
    WHERE claim.event_type = 'TASK_CLAIMED' AND claim.agent_id = :agent
      AND claim.task_id = tasks.task_id))
  AND (:capability IS NULL OR instr(required_capabilities_json, '"' || :capability || '"') > 0)
  AND (:repository IS NULL OR EXISTS (
        SELECT 1 FROM task_proposals AS proposal
        WHERE proposal.task_id = tasks.task_id AND proposal.repository = :repository))
  AND (:created_from IS NULL OR created_at >= :created_from)
  AND (:created_to IS NULL OR created_at <= :created_to)
  AND (:updated_from IS NULL OR updated_at >= :updated_from)
  AND (:updated_to IS NULL OR updated_at <= :updated_to)
  AND (:search IS NULL OR task_id = :search OR instr(lower(goal), :search_lower) > 0)

-- name: tasks_page
-- returns: TaskRow
-- One page of the task list, newest first before the cursor's :after_seq, the page and one
-- more; read backwards down tasks_by_seq, never below :floor_seq (0: no bound).
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_by_seq
WHERE seq < :after_seq
  AND seq >= :floor_seq
  AND (:status IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_page_of_status
-- returns: TaskRow
-- tasks_page for a status few tasks have: its rows of tasks_claim_order, not all of tasks_by_seq.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_claim_order
WHERE status = :status
  AND seq < :after_seq
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_agent$
-- How many claims :agent made, up to :bound + 1: no fewer than the tasks it held.
SELECT count(*) FROM (
  SELECT 1 FROM events INDEXED BY events_claims_by_agent
  WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_agent
-- returns: TaskRow
-- tasks_page for an agent that held few tasks: its claims, each task by its key (the CROSS JOIN
-- keeps that loop order).
SELECT {{task_columns}}
FROM (SELECT DISTINCT task_id AS held_task FROM events INDEXED BY events_claims_by_agent
      WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent) AS held
CROSS JOIN tasks ON tasks.task_id = held.held_task
WHERE seq < :after_seq
  AND (:status IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_created$
-- How many tasks were created in the page's range, up to :bound + 1 (a missing end is open).
SELECT count(*) FROM (
  SELECT 1 FROM tasks INDEXED BY tasks_by_created
  WHERE created_at >= coalesce(:created_from, '0000') AND created_at <= coalesce(:created_to, '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_created
-- returns: TaskRow
-- tasks_page for a created range few tasks fall in: through tasks_by_created, sorted by seq.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_by_created
WHERE created_at >= coalesce(:created_from, '0000') AND created_at <= coalesce(:created_to, '9999')
  AND seq < :after_seq
  AND (:status IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_updated$
-- tasks_count_of_created for the updated range (through tasks_by_updated).
SELECT count(*) FROM (
  SELECT 1 FROM tasks INDEXED BY tasks_by_updated
  WHERE updated_at >= coalesce(:updated_from, '0000') AND updated_at <= coalesce(:updated_to, '9999')
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_updated
-- returns: TaskRow
-- tasks_page for an updated range few tasks fall in: through tasks_by_updated, sorted by seq.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_by_updated
WHERE updated_at >= coalesce(:updated_from, '0000') AND updated_at <= coalesce(:updated_to, '9999')
  AND seq < :after_seq
  AND (:status IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_repository$
-- How many tasks a proposal in :repository names, up to :bound + 1.
SELECT count(*) FROM (
  SELECT DISTINCT task_id FROM task_proposals INDEXED BY task_proposals_by_repository_task
  WHERE repository = :repository
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_repository
-- returns: TaskRow
-- tasks_page for a repository few tasks' proposals name: those tasks by their key, sorted.
SELECT {{task_columns}}
FROM tasks
WHERE task_id IN (
    SELECT task_id FROM task_proposals INDEXED BY task_proposals_by_repository_task
    WHERE repository = :repository)
  AND seq < :after_seq
  AND (:status IS NULL OR status = :status)
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_scan_window^
-- How far a page read in creation order may read (core/tasks/listing.py SCAN_BOUND).
SELECT (SELECT max(seq) FROM tasks INDEXED BY tasks_by_seq WHERE seq < :after_seq) AS top_seq,
       (SELECT min(seq) FROM tasks INDEXED BY tasks_by_seq) AS bottom_seq;

-- name: task_holders
-- A task's claims in order: who held each attempt and when.
SELECT agent_id, payload_json, created_at
FROM events INDEXED BY events_claims_by_task
WHERE event_type = 'TASK_CLAIMED' AND task_id = :task_id
ORDER BY event_id;

-- name: task_last_holders
-- The agent of the last claim of each task of :task_ids_json (a page's ids).
SELECT listed.value AS task_id,
       (SELECT agent_id FROM events INDEXED BY events_claims_by_task
        WHERE event_type = 'TASK_CLAIMED' AND task_id = listed.value
        ORDER BY event_id DESC LIMIT 1) AS last_holder
FROM json_each(:task_ids_json) AS listed;
