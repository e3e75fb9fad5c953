-- Auxiliary runs: reads and the guarded transitions.

-- fragment: auxiliary_run_columns
aux_id, session_id, run_id, parent_json, kind, mode, state, spec_json, spec_digest,
       evidence_digest, owner, revision, created_at_ms, updated_at_ms, output_json,
       output_digest, error_code, error

-- name: get_auxiliary_run^
-- returns: AuxiliaryRunRow
SELECT {{auxiliary_run_columns}}
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
SELECT {{auxiliary_run_columns}}
FROM auxiliary_runs WHERE state IN ('PENDING', 'RUNNING') ORDER BY aux_id;
