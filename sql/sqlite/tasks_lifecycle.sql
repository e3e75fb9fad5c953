-- The task lifecycle: inserts, the one compare-and-swap every transition uses, the claim's
-- candidates, lease expiry, the idempotency ledger and reads.
-- SQLite's own texts of the statements of ../tasks_lifecycle.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../tasks_lifecycle.sql.

-- name: tasks_next_seq$
-- The creation sequence the next task gets, read under the write lock (through tasks_by_seq):
-- claims take equal-priority tasks in this order.
SELECT coalesce(max(seq), 0) + 1 FROM tasks;

-- name: tasks_claim_candidates
-- returns: TaskRow
-- The first :limit QUEUED tasks in claim order that this claimer may take now, through
-- tasks_claim_order: the one candidate statement, with the meaning of PostgreSQL's. Attempts,
-- deadline and schedule are filtered here (timestamps are stored in one fixed format, so text
-- order is time order), and capabilities: every name of required_capabilities_json must be in
-- :offered_json (a JSON array of names); a list that is not a JSON array of names is never a
-- candidate. A governed task awaiting its initial execution projection never is. The core
-- checks each candidate again.
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
-- CLAIMED tasks whose lease has passed, oldest expiry first, through tasks_lease_expiry.
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
-- The filters of a task page but its status (core/tasks/listing.py), each true when not given.
-- An agent matches a task it held in any attempt: a TASK_CLAIMED event of the task names it
-- (one probe of events_claims_by_agent). A required capability is found as its JSON string in the array's text (a capability name
-- is an Identifier: no quote or backslash, so `"name"` matches one whole element, and a list
-- that is not valid JSON matches nothing rather than failing). The search matches the id
-- exactly or the goal's text, lower-cased (SQLite's lower(): ASCII letters).
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
-- One page of the task list: the newest tasks before :after_seq (the cursor's seq; the first
-- page passes one above every seq, so that this is always a range), newest first, :limit of
-- them (the page and one more, to know a next page exists). Through tasks_by_seq read
-- backwards from :after_seq, each filter checked on the rows as they come: a page costs the
-- rows read until :limit match, never the rows before the cursor, and at most SCAN_BOUND
-- rows: none below :floor_seq (tasks_scan_window's; 0: no bound).
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
-- tasks_page for a status few tasks have (the shell asks tasks_count_of_status first):
-- through tasks_claim_order's status prefix, those rows sorted by seq, instead of reading
-- tasks_by_seq past every task of the other statuses.
SELECT {{task_columns}}
FROM tasks INDEXED BY tasks_claim_order
WHERE status = :status
  AND seq < :after_seq
  AND {{task_page_filters}}
ORDER BY seq DESC
LIMIT :limit;

-- name: tasks_count_of_agent$
-- How many claims :agent made, counted up to :bound + 1 at most (through events_claims_by_agent,
-- stopping there): at least as many as the tasks it held, so an agent within the bound held
-- at most :bound tasks.
SELECT count(*) FROM (
  SELECT 1 FROM events INDEXED BY events_claims_by_agent
  WHERE event_type = 'TASK_CLAIMED' AND agent_id = :agent
  LIMIT :bound + 1) AS counted;

-- name: tasks_page_of_agent
-- returns: TaskRow
-- tasks_page for an agent that held few tasks (in any attempt): its claims through
-- events_claims_by_agent, each task by its key (the CROSS JOIN keeps that order of the loops),
-- sorted by seq.
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
-- How many tasks were created in the page's range, counted up to :bound + 1 at most (through
-- tasks_by_created; a missing end of the range is open).
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
-- How many tasks a proposal in :repository names, counted up to :bound + 1 at most (through
-- task_proposals_by_repository_task, covering).
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
-- Where a page read in creation order may read (core/tasks/listing.py SCAN_BOUND): the newest
-- task's seq below :after_seq and the first task's, each one step down tasks_by_seq.
SELECT (SELECT max(seq) FROM tasks INDEXED BY tasks_by_seq WHERE seq < :after_seq) AS top_seq,
       (SELECT min(seq) FROM tasks INDEXED BY tasks_by_seq) AS bottom_seq;

-- name: task_holders
-- A task's claims in order, through events_claims_by_task: who held each attempt and when it
-- was claimed (core/tasks/holders.py reads the attempt from the payload).
SELECT agent_id, payload_json, created_at
FROM events INDEXED BY events_claims_by_task
WHERE event_type = 'TASK_CLAIMED' AND task_id = :task_id
ORDER BY event_id;

-- name: task_last_holders
-- The last holder of each task of :task_ids_json (a JSON array of ids, a page's): the agent of
-- its last claim, one step down events_claims_by_task each.
SELECT listed.value AS task_id,
       (SELECT agent_id FROM events INDEXED BY events_claims_by_task
        WHERE event_type = 'TASK_CLAIMED' AND task_id = listed.value
        ORDER BY event_id DESC LIMIT 1) AS last_holder
FROM json_each(:task_ids_json) AS listed;
