-- Tasks: reads and guarded writes.
-- SQLite's own texts of the statements of ../tasks.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../tasks.sql.

-- name: get_task_for_update^
-- returns: TaskRow
-- The task a write decides on: SQLite's writer holds the whole database (BEGIN IMMEDIATE), so
-- this is get_task; PostgreSQL's text locks the row.
SELECT {{task_columns}}
FROM tasks WHERE task_id = :task_id;
