-- SQLite's texts of ../tasks_lifecycle.sql's statements that differ on PostgreSQL, and its own.

-- fragment: tasks_in_claim_order
-- The tables the shared task-list reads go through, each with the index SQLite must use.
tasks INDEXED BY tasks_claim_order

-- fragment: tasks_by_seq
tasks INDEXED BY tasks_by_seq

-- fragment: tasks_by_created
tasks INDEXED BY tasks_by_created

-- fragment: tasks_by_updated
tasks INDEXED BY tasks_by_updated

-- fragment: claims_by_agent
events INDEXED BY events_claims_by_agent

-- fragment: claims_by_task
events INDEXED BY events_claims_by_task

-- fragment: proposals_by_repository
task_proposals INDEXED BY task_proposals_by_repository_task

-- name: tasks_next_seq$
-- The next task's creation sequence (the claim order of equal priorities), under the write lock.
SELECT coalesce(max(seq), 0) + 1 FROM tasks;

-- name: tasks_claim_candidates
-- returns: TaskRow
-- The first :limit QUEUED tasks this claimer may take now, in claim order; a capability list
-- that is not a JSON array of names never matches. The core checks each candidate again.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_claim_order
WHERE {{claimable_task}}
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

-- name: task_last_holders
-- The agent of the last claim of each task of :task_ids_json (a page's ids).
SELECT listed.value AS task_id,
       (SELECT agent_id FROM events INDEXED BY events_claims_by_task
        WHERE event_type = 'TASK_CLAIMED' AND task_id = listed.value
        ORDER BY event_id DESC LIMIT 1) AS last_holder
FROM json_each(:task_ids_json) AS listed;
