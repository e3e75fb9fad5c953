-- migrate:up
-- The task list's filters at 100,000 tasks (issue 29, console-live): without these an agent
-- filter, a time range or a repository that few tasks match read the whole creation order
-- (tasks_by_seq) to fill a page. With them (core/tasks/listing.py chooses):
-- - an agent (who holds or last held the task): tasks_by_claimer, its tasks in creation order,
--   read backwards from the cursor, so no sort;
-- - a created or updated range, or a repository, that at most SORTED_FILTER_BOUND tasks match
--   (counted up to that bound through its index): read through tasks_by_created,
--   tasks_by_updated or task_proposals_by_repository_task and sorted by seq.
-- A capability (a JSON array's element) and the goal's text have no index: a page read in
-- creation order reads at most SCAN_BOUND tasks below its cursor (its next cursor goes on from
-- there). Numbered 0025 on both engines.
CREATE INDEX tasks_by_claimer ON tasks(claimed_by, seq);
CREATE INDEX tasks_by_created ON tasks(created_at);
CREATE INDEX tasks_by_updated ON tasks(updated_at);
CREATE INDEX task_proposals_by_repository_task ON task_proposals(repository, task_id);

-- migrate:down
DROP INDEX task_proposals_by_repository_task;
DROP INDEX tasks_by_updated;
DROP INDEX tasks_by_created;
DROP INDEX tasks_by_claimer;
