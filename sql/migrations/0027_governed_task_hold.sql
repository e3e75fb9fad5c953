-- migrate:up
-- A task created governed (`task create --governed`, `"governed": true`) waits for its initial
-- execution projection before any worker may take it (issue 36, part 4): without the hold a
-- task created with no required capabilities, as the projection requires, is claimable by
-- every worker until the owner projects it, and once claimed it can never be projected.
-- `awaiting_projection` is 1 from such a create until the projection's own write sets it to
-- 0; the claim's candidate statement and the core's re-check of each candidate refuse a task
-- that holds it, and no other write clears it. Every task from before holds 0 (the default),
-- which its seals, taken without the column, are held against (core/log/rows.py). The partial
-- index keeps `status`'s count of the tasks awaiting their projection an index read. Numbered
-- 0027 on both engines.
ALTER TABLE tasks ADD COLUMN awaiting_projection INTEGER NOT NULL DEFAULT 0
  CHECK (awaiting_projection IN (0, 1));
CREATE INDEX tasks_awaiting_projection ON tasks(seq) WHERE awaiting_projection = 1;

-- migrate:down
-- A ledger that holds a task still awaiting its projection cannot go back: the older schema
-- has no hold, so the task would become claimable (or, cancelled, retried into the queue)
-- without the projection its owner meant to govern it. The insert below fails on the CHECK
-- when any such task exists, and nothing is changed.
CREATE TEMP TABLE governed_tasks_awaiting_projection(
  tasks INTEGER NOT NULL CHECK (tasks = 0)
);
INSERT INTO governed_tasks_awaiting_projection(tasks)
  SELECT count(*) FROM tasks WHERE awaiting_projection = 1;
DROP TABLE governed_tasks_awaiting_projection;
DROP INDEX tasks_awaiting_projection;
ALTER TABLE tasks DROP COLUMN awaiting_projection;
