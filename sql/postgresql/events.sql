-- PostgreSQL's texts of ../events.sql's statements that differ on SQLite, and its own.

-- name: log_next_event_id$
-- The id the next event gets under the exclusive ledger lock, from the sequence, which never
-- hands an id out twice: ids rise along each chain but are not dense nor in commit order.
SELECT nextval('event_ids');

-- name: log_event_ids_used!
-- After a plan under the exclusive lock: the next id drawn is the one after its events.
SELECT setval('event_ids', :next_event_id, false);

-- name: log_reserve_event_ids
-- Ids for a plan decided under row locks beside other writers, one per event, rising (their
-- seals do not cover them).
SELECT nextval('event_ids') AS event_id FROM generate_series(1, :count);
