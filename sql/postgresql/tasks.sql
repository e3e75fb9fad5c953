-- PostgreSQL's texts of ../tasks.sql's statements that differ on SQLite, and its own.

-- name: get_task_for_update^
-- returns: TaskRow
-- The task a write decides on, locked until COMMIT: another writer of it waits, then reads
-- what this one committed.
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id
FOR UPDATE;
