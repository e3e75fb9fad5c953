-- The append-only event log and its seals.

-- name: insert_event!
INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, created_at)
VALUES (:event_id, :task_id, :agent_id, :event_type, :payload_json, :created_at);

-- name: chain_tip^
-- returns: ChainTip
SELECT chain, chain_seq, seal, chained_row_digest FROM event_seals WHERE chain = :chain
ORDER BY chain_seq DESC LIMIT 1;

-- name: insert_seal!
INSERT INTO event_seals(event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption,
                        seal_version, row_changes, chained_row_digest)
VALUES (:event_id, :chain, :chain_seq, :prev_seal, :seal, :sealed_at_adoption, :seal_version,
        :row_changes, :chained_row_digest);

-- name: insert_sealed_row!
-- A state row as the event's v2 seal covers it (the seal's document lists these in position).
INSERT INTO event_seal_rows(event_id, position, row_table, row_key, row_digest)
VALUES (:event_id, :position, :row_table, :row_key, :row_digest);

-- name: unsealed_events
-- returns: EventRow
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at
FROM events AS e LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE s.event_id IS NULL
ORDER BY e.event_id;

-- name: events_for_task
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM events WHERE task_id = :task_id ORDER BY event_id;

-- name: events_after
-- `events --follow`: the next page of the log after a cursor (core/log/follow.py).
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM events WHERE event_id > :after ORDER BY event_id LIMIT :limit;

-- name: events_after_for_task
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at
FROM events WHERE task_id = :task_id AND event_id > :after ORDER BY event_id LIMIT :limit;

-- name: task_result_author$
-- Who wrote the result a task holds: the holder its last RESULT_SUBMITTED names (a reviewer
-- may not judge its own result, `SELF_REVIEW`). Along a task's chain event ids rise.
SELECT agent_id FROM events
WHERE task_id = :task_id AND event_type = :event_type
ORDER BY event_id DESC LIMIT 1;
