-- SQLite's texts of ../event_log.sql's statements that differ on PostgreSQL, and its own.

-- name: state_task_chain_seals
-- The seals of every task chain in chain order, byte by byte: `verify` folds each chain's
-- changes into the task row they say was written last.
SELECT s.chain, s.event_id, s.row_changes, s.chained_row_digest
FROM event_seals AS s
WHERE s.chain >= 'task:' AND s.chain < 'task;'
ORDER BY s.chain, s.chain_seq;

-- name: log_id_counter$
-- The last event id AUTOINCREMENT handed out (NULL before the first event).
SELECT seq FROM sqlite_sequence WHERE name = 'events';

-- fragment: run_event_of_row_key
-- `state_rows_gone`'s run event by its key `RUN_ID SEQ` (the sealed row `r`), by primary key.
run_id = substr(r.row_key, 1, instr(r.row_key, ' ') - 1)
      AND seq = CAST(substr(r.row_key, instr(r.row_key, ' ') + 1) AS INTEGER)
      AND run_id || ' ' || seq = r.row_key
