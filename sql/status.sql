-- `aios-ledger status`: a summary of the queue that reads indexes, not the whole table.

-- name: status_counts
SELECT status, COUNT(*) AS tasks FROM tasks GROUP BY status ORDER BY status;

-- name: status_oldest_queued^
SELECT task_id, priority, created_at FROM tasks
WHERE status = 'QUEUED' ORDER BY seq LIMIT 1;

-- name: status_awaiting_projection$
-- The governed tasks, QUEUED or PAUSED, still waiting for their initial execution projection.
SELECT count(*) FROM tasks
WHERE awaiting_projection = 1 AND status IN ('QUEUED', 'PAUSED');

-- name: status_last_events
SELECT event_id, task_id, agent_id, event_type, created_at, actor FROM events
ORDER BY event_id DESC LIMIT :limit;

-- name: idle_queue_groups
-- Why a worker finds nothing to claim: the claimable tasks by capabilities and whether due.
SELECT required_capabilities_json,
       CASE WHEN not_before IS NOT NULL AND not_before > :now THEN 1 ELSE 0 END AS not_due,
       COUNT(*) AS tasks,
       MIN(not_before) AS earliest
FROM tasks
WHERE {{claimable_task}}
GROUP BY required_capabilities_json,
         CASE WHEN not_before IS NOT NULL AND not_before > :now THEN 1 ELSE 0 END
LIMIT :limit;
