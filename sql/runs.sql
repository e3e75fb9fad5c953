-- Runs and their append-only events (the evidence auxiliary runs read).

-- name: get_run^
SELECT {{columns_of_runs}}
FROM runs WHERE run_id = :run_id;

-- name: insert_run!
INSERT INTO runs(run_id, session_id, prompt, event_count, created_at, updated_at)
VALUES (:run_id, :session_id, :prompt, 0, :created_at, :created_at);

-- name: insert_attempt_run!
-- An attempt's evidence run, in its claim's plan; a run of that id an older ledger left is kept.
INSERT INTO runs(run_id, session_id, prompt, event_count, created_at, updated_at)
VALUES (:run_id, :session_id, :prompt, 0, :created_at, :created_at)
ON CONFLICT (run_id) DO NOTHING;

-- name: bump_run_event_count!
-- The append's compare-and-swap: a run only grows, so its event count is its revision.
UPDATE runs
SET event_count = event_count + 1,
    updated_at = :updated_at
WHERE run_id = :run_id
  AND event_count = :expected_revision;

-- name: run_events_page
-- The first events of a run in order; evidence reads `limit` = max_events + 1 to see truncation.
SELECT {{columns_of_run_events}}
FROM run_events
WHERE run_id = :run_id AND seq > :after_seq
ORDER BY seq
LIMIT :limit;

-- name: run_events_tail
-- The last events of a run, newest first, for evidence that keeps a run's end.
SELECT {{columns_of_run_events}}
FROM run_events
WHERE run_id = :run_id
ORDER BY seq DESC
LIMIT :limit;
