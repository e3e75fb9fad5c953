-- The append-only event log and its seals.

-- name: log_next_event_id$
-- The id the next event gets, for a write under the exclusive ledger lock (no other writer
-- draws ids meanwhile): drawn from the sequence, and the sequence set past the transaction's
-- events once its plan is applied (log_event_ids_used). Ids are never handed out twice (the
-- sequence does not roll back), rise along each chain, and are neither dense nor in commit order.
SELECT nextval('event_ids');

-- name: log_peek_next_event_id$
-- What log_next_event_id would draw, for a read (a preview's decision), which draws nothing.
SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM event_ids;

-- name: log_event_ids_used!
-- After a plan under the exclusive lock: the next id drawn is the one after its events.
SELECT setval('event_ids', :next_event_id, false);

-- name: log_reserve_event_ids
-- Ids for a plan decided under row locks, beside other writers: as many as it has events, in
-- rising order (the core numbers the plan's events with them; their v3 seals do not cover them).
SELECT nextval('event_ids') AS event_id FROM generate_series(1, :count);

-- name: insert_event!
INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, created_at)
VALUES (:event_id, :task_id, :agent_id, :event_type, :payload_json, :created_at);

-- name: chain_tip^
-- The tip of a chain its writer may extend: a task's chain under the task's row lock, the
-- ledger's under the exclusive ledger lock. UNIQUE (chain, chain_seq) is the backstop.
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

-- name: events_after
-- `events --follow`: the next page of the log after a cursor (core/log/follow.py; ids here are
-- not in commit order, so the cursor reads back over its last polls).
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
