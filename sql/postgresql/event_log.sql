-- Reading the sealed event log for verification, heads and exports (issue 3).
-- Every statement streams in event id order; none holds more than one row at a time.
-- PostgreSQL's own texts of the statements of ../event_log.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../event_log.sql.

-- name: state_task_chain_seals
-- The seals of every task chain, in chain order, byte by byte (the "C" collation, as
-- `state_rows_tasks`): `verify` folds each chain's changes into the task row they say was
-- written last.
SELECT s.chain, s.event_id, s.row_changes, s.chained_row_digest
FROM event_seals AS s
WHERE s.chain COLLATE "C" >= 'task:' AND s.chain COLLATE "C" < 'task;'
ORDER BY s.chain COLLATE "C", s.chain_seq;

-- name: log_id_counter$
-- The last event id handed out (NULL before the first event): the sequence's (the PostgreSQL
-- counterpart of SQLite's AUTOINCREMENT sequence; ids are not dense here, so the verifier only
-- reports it).
SELECT CASE WHEN is_called THEN last_value END FROM event_ids;

-- fragment: run_event_of_row_key
-- `state_rows_gone`'s run event by its key `RUN_ID SEQ` (the sealed row `r`): looked up by its
-- primary key (a seq in its one decimal spelling).
run_id = split_part(r.row_key, ' ', 1)
      AND seq = CASE WHEN split_part(r.row_key, ' ', 2) ~ '^[1-9][0-9]{0,17}$'
                     THEN split_part(r.row_key, ' ', 2)::bigint END
      AND run_id || ' ' || seq = r.row_key
