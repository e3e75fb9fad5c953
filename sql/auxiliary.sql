-- Auxiliary runs: reads and the guarded transitions.

-- name: get_auxiliary_run^
-- returns: AuxiliaryRunRow
SELECT {{columns_of_auxiliary_runs}}
FROM auxiliary_runs WHERE aux_id = :aux_id;

-- name: insert_auxiliary_run!
INSERT INTO auxiliary_runs(aux_id, session_id, run_id, parent_json, kind, mode, state,
                           spec_json, spec_digest, evidence_digest, owner, revision,
                           created_at_ms, updated_at_ms)
VALUES (:aux_id, :session_id, :run_id, :parent_json, :kind, :mode, :state,
        :spec_json, :spec_digest, :evidence_digest, :owner, 1,
        :created_at_ms, :created_at_ms);

-- name: transition_auxiliary_run!
-- The transition's compare-and-swap: the run is still at the revision the decision read.
UPDATE auxiliary_runs
SET state = :state,
    revision = revision + 1,
    updated_at_ms = :updated_at_ms,
    output_json = :output_json,
    output_digest = :output_digest,
    error_code = :error_code,
    error = :error
WHERE aux_id = :aux_id
  AND revision = :expected_revision;

-- name: unfinished_auxiliary_runs
-- returns: AuxiliaryRunRow
SELECT {{columns_of_auxiliary_runs}}
FROM auxiliary_runs WHERE state IN ('PENDING', 'RUNNING') ORDER BY aux_id;

-- name: list_auxiliary_runs
-- returns: AuxiliaryRunRow
SELECT {{columns_of_auxiliary_runs}}
FROM auxiliary_runs
WHERE (CAST(:state AS text) IS NULL OR state = :state)
  AND (CAST(:session_id AS text) IS NULL OR session_id = :session_id)
  AND (CAST(:run_id AS text) IS NULL OR run_id = :run_id)
ORDER BY created_at_ms, aux_id
LIMIT :limit;

-- name: review_candidates
-- The one place `review` chooses its tasks: fewest failed reviews of the attempt first, so a
-- failing task never holds a round up.
SELECT {{task_columns}},
       (SELECT COUNT(*) FROM auxiliary_runs AS a
        WHERE a.session_id = 'task:' || tasks.task_id
          AND a.run_id = tasks.task_id || '@' || tasks.attempt
          AND a.kind = 'review'
          AND a.state IN ('FAILED', 'CANCELLED')) AS failed_reviews
FROM {{tasks_in_claim_order}}
WHERE tasks.status = 'SUBMITTED' AND tasks.verification_mode = 'reviewer'
  AND NOT EXISTS (SELECT 1 FROM task_spend AS s
                  WHERE s.task_id = tasks.task_id AND s.attempt = tasks.attempt AND s.over_budget = 1)
ORDER BY failed_reviews, tasks.priority DESC, tasks.seq
LIMIT :limit;
