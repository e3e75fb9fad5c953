-- migrate:up
-- Who held a task stays known (issue 36 part 3): each attempt's holder is the agent of its
-- sealed TASK_CLAIMED event (`tasks.claimed_by` is cleared at submit and at a requeue, as the
-- older runtime's contract has it). Two partial indexes, one entry per claim, make the holders
-- index reads (core/tasks/listing.py chooses):
-- - events_claims_by_agent: the tasks an agent held in any attempt (the task list's agent
--   filter, counted up to SORTED_FILTER_BOUND and read through it, or probed per task in
--   creation order);
-- - events_claims_by_task: a task's holders in claim order, and its last holder.
-- tasks_by_claimer (0025) served the agent filter when it matched the current holder only;
-- nothing reads it now, and every claim and submit wrote it. Numbered 0028 on both engines.
CREATE INDEX events_claims_by_agent ON events(agent_id, task_id)
WHERE event_type = 'TASK_CLAIMED';
CREATE INDEX events_claims_by_task ON events(task_id, event_id)
WHERE event_type = 'TASK_CLAIMED';
DROP INDEX tasks_by_claimer;

-- migrate:down
CREATE INDEX tasks_by_claimer ON tasks(claimed_by, seq);
DROP INDEX events_claims_by_task;
DROP INDEX events_claims_by_agent;
