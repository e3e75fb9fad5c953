-- Copying a whole ledger (`aios-ledger copy`) from SQLite: what is not one table's rows (those
-- are read with `all_TABLE`, which the catalogue of tables renders, `core/sealed_tables.py`).

-- name: copy_event_id_counter$
-- The last event id the source handed out (its archived events' ids are never handed out again).
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
           coalesce((SELECT max(event_id) FROM events), 0));
