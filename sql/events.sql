-- The append-only event log and its seals.

-- name: insert_event<!
INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at)
VALUES (:task_id, :agent_id, :event_type, :payload_json, :created_at)
RETURNING event_id;

-- name: chain_tip^
SELECT chain_seq, seal FROM event_seals WHERE chain = :chain
ORDER BY chain_seq DESC LIMIT 1;

-- name: insert_seal!
INSERT INTO event_seals(event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption)
VALUES (:event_id, :chain, :chain_seq, :prev_seal, :seal, :sealed_at_adoption);

-- name: unsealed_events
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at
FROM events AS e LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE s.event_id IS NULL
ORDER BY e.event_id;

-- name: events_for_task
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM events WHERE task_id = :task_id ORDER BY event_id;
