-- Reading the sealed event log for verification, heads and exports (issue 3).
-- Every statement streams in event id order; none holds more than one row at a time.
-- SQLite's own texts of the statements of ../event_log.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../event_log.sql.

-- name: state_task_chain_seals
-- The seals of every task chain that holds a v5 or v4 seal, in chain order (through the unique
-- (chain, chain_seq) index), byte by byte: `verify` folds each chain's changes into the task
-- row they say was written last, beside `state_rows_tasks`; `task_image`: the seal's rows hold
-- an image of the task row (a 0.x seal sealed again by `upgrade`), which ends the chained digest.
SELECT s.chain, s.event_id, s.seal_version, s.row_changes, s.chained_row_digest,
       EXISTS (SELECT 1 FROM event_seal_rows AS r
               WHERE r.event_id = s.event_id AND r.row_table = 'tasks'
                 AND r.row_key = substr(s.chain, 6)) AS task_image
FROM event_seals AS s
WHERE s.chain IN (SELECT c.chain FROM event_seals AS c
                  WHERE c.seal_version IN (4, 5) AND c.chain >= 'task:' AND c.chain < 'task;')
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
