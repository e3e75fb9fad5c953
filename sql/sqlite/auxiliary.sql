-- SQLite's texts of ../auxiliary.sql's statements that differ on PostgreSQL, and its own.

-- name: list_auxiliary_runs
-- returns: AuxiliaryRunRow
SELECT {{auxiliary_run_columns}}
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
-- The one place `review` chooses its tasks: fewest failed reviews of the attempt first, so a
-- failing task never holds a round up.
SELECT {{task_columns}},
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
