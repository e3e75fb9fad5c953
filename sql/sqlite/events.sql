-- The append-only event log and its seals.
-- SQLite's own texts of the statements of ../events.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../events.sql.

-- name: log_next_event_id$
-- The id the next event gets, read under the write lock: the core seals events over their ids.
-- AUTOINCREMENT never hands out an id again, even one whose row is gone, so the counter counts
-- as well as the rows; inserting an id explicitly moves the counter on as its own would.
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
           coalesce((SELECT max(event_id) FROM events), 0)) + 1;
