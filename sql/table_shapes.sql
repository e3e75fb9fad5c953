-- The shapes of the per-table statements, filled from the catalogue of tables at load.

-- shape: all_rows
-- Every row of a table, in key order (copy, verify and the lists that show them all).
SELECT {{columns}}
FROM {{table}} ORDER BY {{key}};

-- shape: insert
INSERT INTO {{table}}(
  {{columns}})
VALUES (
  {{parameters}});

-- shape: insert_or_replace
-- A whole row inserted over the one row the target already holds (an empty tree's head).
INSERT INTO {{table}}(
  {{columns}})
VALUES (
  {{parameters}})
ON CONFLICT ({{key}}) DO UPDATE
SET {{updates}};

-- shape: parameter
:{{column}}

-- shape: set_excluded
{{column}} = excluded.{{column}}

-- shape: state_rows
-- A sealed table's rows beside the last sealed row of each; the history fragments name `stored`.
SELECT {{selected}},
       s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       {{history}} AS sealed_history
FROM {{table}} AS stored
LEFT JOIN event_seal_rows AS s
  ON s.row_table = '{{table}}' AND s.row_key = {{key}}
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = '{{table}}'
                     AND row_key = {{key}}){{in_key_order}};

-- shape: in_key_order
-- The optional last line of `state_rows`.
ORDER BY {{columns}}

-- shape: stored_row
stored.*

-- shape: stored_row_and_key
-- A two-column key selected as the one text the seals record.
stored.*, {{key}} AS {{key_name}}

-- shape: stored_column
stored.{{column}}

-- shape: two_column_key
{{first}} || ' ' || {{second}}

-- shape: state_row_exists
-- `state_rows_gone`'s arm of a sealed table: whether the row a seal (`r`) names is there.
  WHEN '{{table}}' THEN EXISTS (
    SELECT 1 FROM {{table}} WHERE {{lookup}})

-- shape: sealed_row_key
{{key}} = r.row_key

-- shape: archive_rows
-- A task's rows of a table an archive takes, with the digest their last seal took.
SELECT {{selected}},
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = '{{table}}' AND s.row_key = {{key}}
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM {{table}} AS stored
WHERE {{of_task}}
ORDER BY {{key_columns}};

-- shape: delete_archived
DELETE FROM {{table}} WHERE {{of_task}};

-- shape: archived_key_taken
-- `restore_row_taken`'s arm: whether a row of the file's key is in the table now.
SELECT 'key' FROM {{table}}
WHERE :row_table = '{{table}}' AND {{key}} = :row_key

-- shape: union_all
UNION ALL

-- shape: columns
-- A table's columns: `{{task_columns}}`, and `{{columns_of_TABLE}}` for every other table.
{{columns}}

-- The rows an archive takes with a task (`:task_id`), by the column that names it.
-- shape: of_task_by_task_id
task_id = :task_id

-- shape: of_task_by_subject
subject = :task_id

-- shape: of_task_by_session
-- A task's attempt runs (`TASK@N`) and their reviews are in its session, `task:TASK`.
session_id = 'task:' || :task_id

-- shape: of_task_by_session_runs
-- The events of the task's attempt runs, which a trigger lets go once its chain is listed.
run_id IN (SELECT run_id FROM runs WHERE session_id = 'task:' || :task_id)
