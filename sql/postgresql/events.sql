-- The append-only event log and its seals.

-- name: log_next_event_id$
-- The id the next event gets, read under the write lock: the core seals events over their ids.
-- The counter row never hands out an id again, even one whose row is gone (archived); every
-- transaction's events move it on at its COMMIT (trigger events_count_id), so ids
-- are dense: a rolled-back writer leaves no gap. Writers are serialized (the write lock), so no
-- two transactions read the same id.
SELECT greatest(c.last_event_id, coalesce((SELECT max(event_id) FROM events), 0)) + 1
FROM event_id_counter AS c;

-- name: insert_event!
INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, created_at)
VALUES (:event_id, :task_id, :agent_id, :event_type, :payload_json, :created_at);

-- name: chain_tip^
SELECT chain, chain_seq, seal FROM event_seals WHERE chain = :chain
ORDER BY chain_seq DESC LIMIT 1;

-- name: insert_seal!
INSERT INTO event_seals(event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption,
                        seal_version)
VALUES (:event_id, :chain, :chain_seq, :prev_seal, :seal, :sealed_at_adoption, :seal_version);

-- name: insert_sealed_row!
-- A state row as the event's v2 seal covers it (the seal's document lists these in position).
INSERT INTO event_seal_rows(event_id, position, row_table, row_key, row_digest)
VALUES (:event_id, :position, :row_table, :row_key, :row_digest);

-- name: unsealed_events
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at
FROM events AS e LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE s.event_id IS NULL
ORDER BY e.event_id;

-- name: events_for_task
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM events WHERE task_id = :task_id ORDER BY event_id;
