-- Tasks: reads and guarded writes.
-- PostgreSQL's own texts of the statements of ../tasks.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../tasks.sql.

-- name: get_task_for_update^
-- returns: TaskRow
-- The task a write decides on, under its row lock until COMMIT: another writer of the same task
-- waits here and then reads what this one committed (READ COMMITTED re-reads the locked row).
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id
FOR UPDATE;
