-- PostgreSQL's texts of ../event_log.sql's statements that differ on SQLite, and its own.

-- name: state_task_chain_seals
-- The seals of every task chain in chain order, byte by byte (the "C" collation): `verify`
-- folds each chain's changes into the task row they say was written last.
SELECT s.chain, s.event_id, s.row_changes, s.chained_row_digest
FROM event_seals AS s
WHERE s.chain COLLATE "C" >= 'task:' AND s.chain COLLATE "C" < 'task;'
ORDER BY s.chain COLLATE "C", s.chain_seq;

-- name: log_id_counter$
-- The last event id the sequence handed out (NULL before the first event).
SELECT CASE WHEN is_called THEN last_value END FROM event_ids;

-- fragment: run_event_of_row_key
-- `state_rows_gone`'s run event by its key `RUN_ID SEQ` (the sealed row `r`), by primary key.
run_id = split_part(r.row_key, ' ', 1)
      AND seq = CASE WHEN split_part(r.row_key, ' ', 2) ~ '^[1-9][0-9]{0,17}$'
                     THEN split_part(r.row_key, ' ', 2)::bigint END
      AND run_id || ' ' || seq = r.row_key
