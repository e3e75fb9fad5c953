-- The append-only event log and its seals.
-- PostgreSQL's own texts of the statements of ../events.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../events.sql.

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
-- rising order (the core numbers the plan's events with them; their seals do not cover them).
SELECT nextval('event_ids') AS event_id FROM generate_series(1, :count);
