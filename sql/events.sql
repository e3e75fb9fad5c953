-- The append-only event log and its seals.

-- name: chain_tip^
-- returns: ChainTip
SELECT chain, chain_seq, seal, chained_row_digest FROM event_seals WHERE chain = :chain
ORDER BY chain_seq DESC LIMIT 1;

-- name: unsealed_events
-- returns: EventRow
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at, e.actor
FROM events AS e LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE s.event_id IS NULL
ORDER BY e.event_id;

-- name: events_after
-- `events --follow`: the next page of the log after a cursor (core/log/follow.py).
SELECT {{columns_of_events}}
FROM events WHERE event_id > :after ORDER BY event_id LIMIT :limit;

-- name: events_after_for_task
SELECT {{columns_of_events}}
FROM events WHERE task_id = :task_id AND event_id > :after ORDER BY event_id LIMIT :limit;

-- name: task_result_author$
-- The holder the task's last RESULT_SUBMITTED names: a reviewer may not judge its own result.
SELECT agent_id FROM events
WHERE task_id = :task_id AND event_type = :event_type
ORDER BY event_id DESC LIMIT 1;

-- name: event_stream_head$
-- A stream's head: the Merkle tree's size, whose leaves are in commit order on both engines.
SELECT coalesce((SELECT size FROM merkle_tree WHERE only_row = 1), 0);

-- name: event_stream_leaf_event$
-- The event a stream's cursor stands on (the last one it sent, or the head it started at).
SELECT event_id FROM merkle_leaves WHERE leaf_index = :leaf_index;

-- name: event_stream_page
-- The next events of a stream after the cursor's leaf, within the head (archived ones not sent).
SELECT l.leaf_index, e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json,
       e.created_at, e.actor
FROM merkle_leaves AS l JOIN events AS e ON e.event_id = l.event_id
WHERE l.leaf_index > :after_leaf AND l.leaf_index < :size
ORDER BY l.leaf_index LIMIT :limit;

-- name: event_stream_page_for_task
-- The same for one task: its events (by its index on events) after the cursor's leaf.
SELECT l.leaf_index, e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json,
       e.created_at, e.actor
FROM events AS e JOIN merkle_leaves AS l ON l.event_id = e.event_id
WHERE e.task_id = :task_id AND l.leaf_index > :after_leaf AND l.leaf_index < :size
ORDER BY l.leaf_index LIMIT :limit;
