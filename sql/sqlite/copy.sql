-- Copying a whole ledger (`aios-ledger copy`): every table's rows, in key order, with their
-- columns named (the same names on both engines). The table list is shell/log/copy.py's.
-- SQLite's own texts of the statements of ../copy.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../copy.sql.

-- name: copy_event_id_counter$
-- The last event id the source handed out (its archived events' ids are never handed out again).
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
           coalesce((SELECT max(event_id) FROM events), 0));
