-- `aios-ledger status`: a summary of the queue that reads indexes, not the whole table.

-- name: status_counts
SELECT status, COUNT(*) AS tasks FROM tasks GROUP BY status ORDER BY status;

-- name: status_oldest_queued^
SELECT task_id, priority, created_at FROM tasks
WHERE status = 'QUEUED' ORDER BY seq LIMIT 1;

-- name: status_expiring_leases
SELECT task_id, claimed_by, lease_expires_at FROM tasks
WHERE status = 'CLAIMED' AND lease_expires_at <= :until
ORDER BY lease_expires_at LIMIT :limit;

-- name: status_last_events
SELECT event_id, task_id, agent_id, event_type, created_at FROM events
ORDER BY event_id DESC LIMIT :limit;
