-- Reading the sealed event log for verification, heads and exports (issue 3).
-- Every statement streams in event id order; none holds more than one row at a time.
-- SQLite's own texts of the statements of ../event_log.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../event_log.sql.

-- name: state_task_chain_seals
-- The seals of every task chain, in chain order (through the unique (chain, chain_seq) index),
-- byte by byte: `verify` folds each chain's changes into the task row they say was written
-- last, beside `state_rows_tasks`.
SELECT s.chain, s.event_id, s.row_changes, s.chained_row_digest
FROM event_seals AS s
WHERE s.chain >= 'task:' AND s.chain < 'task;'
ORDER BY s.chain, s.chain_seq;

-- name: log_id_counter$
-- The last event id AUTOINCREMENT handed out (NULL before the first event).
SELECT seq FROM sqlite_sequence WHERE name = 'events';

-- fragment: run_event_of_row_key
-- `state_rows_gone`'s run event by its key `RUN_ID SEQ` (the sealed row `r`): looked up by its
-- primary key, then held to the key exactly.
run_id = substr(r.row_key, 1, instr(r.row_key, ' ') - 1)
      AND seq = CAST(substr(r.row_key, instr(r.row_key, ' ') + 1) AS INTEGER)
      AND run_id || ' ' || seq = r.row_key
