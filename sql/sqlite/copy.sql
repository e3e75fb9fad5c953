-- Copying a whole ledger from SQLite: what is not one table's rows (`all_TABLE`).

-- name: copy_event_id_counter$
-- The last event id the source handed out (its archived events' ids are never handed out again).
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
           coalesce((SELECT max(event_id) FROM events), 0));
