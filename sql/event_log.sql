-- Reading the sealed event log for verification, heads and exports (issue 3).
-- Every statement streams in event id order; none holds more than one row at a time.

-- name: log_verify_rows
-- Each event with its seal and the seal just before it in its chain (through the unique
-- (chain, chain_seq) index), so that the verifier needs no per-chain state.
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption,
       p.event_id AS pred_event_id, p.chain_seq AS pred_chain_seq, p.seal AS pred_seal
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
LEFT JOIN event_seals AS p ON p.chain = s.chain AND p.chain_seq = s.chain_seq - 1
ORDER BY e.event_id;

-- name: log_orphan_seals
-- Seals whose event row is gone.
SELECT s.event_id, s.chain, s.chain_seq, s.prev_seal, s.seal, s.sealed_at_adoption
FROM event_seals AS s
LEFT JOIN events AS e ON e.event_id = s.event_id
WHERE e.event_id IS NULL
ORDER BY s.event_id;

-- name: log_id_counter$
-- The last event id AUTOINCREMENT handed out (NULL before the first event).
SELECT seq FROM sqlite_sequence WHERE name = 'events';

-- name: log_max_event_id$
SELECT coalesce(max(event_id), 0) FROM events;

-- name: log_head_rows
SELECT e.event_id, s.seal
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
ORDER BY e.event_id;

-- name: log_export_all
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
ORDER BY e.event_id;

-- name: log_export_task
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE e.task_id = :task_id
ORDER BY e.event_id;

-- name: log_task_event_count$
SELECT count(*) FROM events WHERE task_id = :task_id;
