-- SQLite's texts of ../events.sql's statements that differ on PostgreSQL, and its own.

-- name: log_next_event_id$
-- The id the next event gets, read under the write lock. AUTOINCREMENT never hands an id out
-- again, even one whose row is gone, so the counter counts as well as the rows.
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
           coalesce((SELECT max(event_id) FROM events), 0)) + 1;
