-- The console's pages beyond the task list: each read is bounded, so a page costs the same at
-- 100,000 tasks as at ten.

-- name: console_writer_leases_held
-- The writer leases held now (a released lease keeps its row, holder NULL).
SELECT repository, ref, holder, generation, updated_at
FROM writer_leases WHERE holder IS NOT NULL
ORDER BY repository, ref LIMIT :limit;

-- name: console_branch_moves
-- The ledger's governed writes, newest first: each moved (or tried to move) a protected ref.
SELECT task_id, repository, ref, old_oid, new_oid, state, code, updated_at
FROM governed_writes
ORDER BY updated_at DESC, idempotency_key DESC LIMIT :limit;

-- name: console_tasks_held
-- Who holds what: the claimed tasks, the soonest to expire first (through tasks_lease_expiry).
SELECT task_id, claimed_by, attempt, lease_expires_at
FROM tasks WHERE status = 'CLAIMED'
ORDER BY lease_expires_at, task_id LIMIT :limit;

-- name: console_last_heartbeats
-- Each agent's last claim or heartbeat among the events after :after (the newest window).
SELECT agent_id, MAX(created_at) AS last_seen, COUNT(*) AS beats
FROM events
WHERE event_id > :after AND agent_id IS NOT NULL
  AND event_type IN ('TASK_CLAIMED', 'TASK_HEARTBEAT')
GROUP BY agent_id ORDER BY agent_id LIMIT :limit;

-- name: console_checkpoints_recent
-- The newest signed checkpoints and how many witnesses cosigned each.
SELECT c.checkpoint_id, c.origin, c.tree_size, c.root_hash, c.key_id, c.signed_at,
       (SELECT COUNT(*) FROM checkpoint_cosignatures AS w
        WHERE w.checkpoint_id = c.checkpoint_id) AS cosignatures
FROM checkpoints AS c ORDER BY c.checkpoint_id DESC LIMIT :limit;

-- name: console_archive_history
-- The archives taken, newest first: ledger-level events (events_by_task, task_id NULL).
SELECT event_id, payload_json, created_at
FROM events WHERE task_id IS NULL AND event_type = 'TASKS_ARCHIVED'
ORDER BY event_id DESC LIMIT :limit;

-- name: console_event_counts
-- The events after :after counted by hour (the RFC 3339 text's first 13 characters) and kind.
SELECT substr(created_at, 1, 13) AS hour, event_type, COUNT(*) AS events
FROM events WHERE event_id > :after
GROUP BY substr(created_at, 1, 13), event_type
ORDER BY hour, event_type;

-- name: console_verdicts
-- The reviewers' verdicts after :after (a review failure is one not SUCCEEDED).
SELECT created_at, payload_json
FROM events WHERE event_id > :after AND event_type = 'TASK_VERIFIED'
ORDER BY event_id;

-- name: console_task_event_count
-- A task's page: how many events the task has and its last, counted in events_by_task alone.
SELECT COUNT(*) AS event_count, COALESCE(MAX(event_id), 0) AS last_event_id
FROM events WHERE task_id = :task_id;

-- name: console_task_events_before
-- A task's page: its last :limit events below :before, newest first (a keyset read).
{{sealed_events}}
WHERE e.task_id = :task_id AND e.event_id < :before
ORDER BY e.event_id DESC LIMIT :limit;

-- name: console_task_marks
-- A task's page: its claims, submissions, verdicts and governed writes; never its heartbeats.
SELECT {{columns_of_events}}
FROM events
WHERE task_id = :task_id
  AND event_type IN ('TASK_CLAIMED', 'RESULT_SUBMITTED', 'TASK_VERIFIED',
                     'GOVERNED_WRITE_INTENDED', 'GOVERNED_WRITE_APPLIED',
                     'GOVERNED_WRITE_NOT_APPLIED', 'GOVERNED_WRITE_MOVED_BY_OTHER',
                     'PULL_REQUEST_OPENED', 'PULL_REQUEST_FAILED')
ORDER BY event_id;

-- name: console_task_refusals
-- A task's page: its latest :limit attempts refused by a check, with who tried.
SELECT event_id, event_type, payload_json, created_at, actor
FROM events
WHERE task_id = :task_id
  AND event_type IN ('GOVERNED_WRITE_REFUSED', 'TASK_INITIAL_EXECUTION_PROJECTION_REFUSED')
ORDER BY event_id DESC LIMIT :limit;
