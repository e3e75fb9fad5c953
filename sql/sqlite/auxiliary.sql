-- SQLite's texts of ../auxiliary.sql's statements that differ on PostgreSQL, and its own.

-- name: list_auxiliary_runs
-- returns: AuxiliaryRunRow
SELECT aux_id, session_id, run_id, parent_json, kind, mode, state, spec_json, spec_digest,
       evidence_digest, owner, revision, created_at_ms, updated_at_ms, output_json,
       output_digest, error_code, error
FROM auxiliary_runs
WHERE (:state IS NULL OR state = :state)
  AND (:session_id IS NULL OR session_id = :session_id)
  AND (:run_id IS NULL OR run_id = :run_id)
ORDER BY created_at_ms, aux_id
LIMIT :limit;

-- name: auxiliary_run_events
-- The transitions of one auxiliary run, as appended (and sealed) to the ledger-level chain.
SELECT e.event_id, e.event_type, e.payload_json, e.created_at, e.actor, s.chain, s.chain_seq
FROM events AS e JOIN event_seals AS s ON s.event_id = e.event_id
WHERE e.task_id IS NULL AND e.event_type LIKE 'AUXILIARY_RUN_%'
  AND json_extract(e.payload_json, '$.aux_id') = :aux_id
ORDER BY e.event_id;

-- name: review_candidates
-- The one place `review` chooses its tasks: SUBMITTED ones judged by a reviewer and within
-- budget, fewest failed reviews of the attempt first, so a failing task never holds a round up.
SELECT t.task_id, t.goal, t.instructions, t.success_criteria_json, t.required_capabilities_json,
       t.constraints_json, t.metadata_json, t.deadline, t.priority, t.max_attempts, t.attempt,
       t.status, t.claimed_by, t.lease_token_hash, t.lease_expires_at, t.result_json,
       t.result_digest, t.result_idempotency_key, t.verification_json, t.revision, t.created_at,
       t.updated_at, t.verification_mode, t.retry_base_seconds, t.retry_max_seconds,
       t.not_before, t.seq, t.awaiting_projection,
       (SELECT COUNT(*) FROM auxiliary_runs AS a
        WHERE a.session_id = 'task:' || t.task_id
          AND a.run_id = t.task_id || '@' || t.attempt
          AND a.kind = 'review'
          AND a.state IN ('FAILED', 'CANCELLED')) AS failed_reviews
FROM tasks AS t INDEXED BY tasks_claim_order
WHERE t.status = 'SUBMITTED' AND t.verification_mode = 'reviewer'
  AND NOT EXISTS (SELECT 1 FROM task_spend AS s
                  WHERE s.task_id = t.task_id AND s.attempt = t.attempt AND s.over_budget = 1)
ORDER BY failed_reviews, t.priority DESC, t.seq
LIMIT :limit;
