-- SQLite's texts of ../tasks.sql's statements that differ on PostgreSQL, and its own.

-- name: get_task_for_update^
-- returns: TaskRow
-- get_task: SQLite's writer holds the whole database already; PostgreSQL's text locks the row.
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id;
