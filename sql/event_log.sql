-- Reading the sealed event log for verification, heads and exports, streamed in event id order.

-- name: log_verify_rows
-- Each event with its seal and the one before it in its chain: the verifier keeps no chain state.
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at, e.actor,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption, s.seal_version, s.row_changes, s.chained_row_digest,
       p.event_id AS pred_event_id, p.chain_seq AS pred_chain_seq, p.seal AS pred_seal
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
LEFT JOIN event_seals AS p ON p.chain = s.chain AND p.chain_seq = s.chain_seq - 1
ORDER BY e.event_id;

-- name: log_orphan_seals
-- Seals whose event row is gone.
SELECT s.event_id, s.chain, s.chain_seq, s.prev_seal, s.seal, s.sealed_at_adoption,
       s.seal_version, s.row_changes, s.chained_row_digest
FROM event_seals AS s
LEFT JOIN events AS e ON e.event_id = s.event_id
WHERE e.event_id IS NULL
ORDER BY s.event_id;

-- name: runs_events_disagreeing
-- Runs whose event count is not that of their events numbered 1..count (changed by hand).
SELECT r.run_id, r.event_count, count(e.seq) AS events, coalesce(max(e.seq), 0) AS last_seq
FROM runs AS r LEFT JOIN run_events AS e ON e.run_id = r.run_id
GROUP BY r.run_id, r.event_count
HAVING count(e.seq) <> r.event_count OR coalesce(max(e.seq), 0) <> r.event_count
ORDER BY r.run_id;

-- name: run_events_without_run
SELECT DISTINCT e.run_id FROM run_events AS e
WHERE NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = e.run_id)
ORDER BY e.run_id;

-- name: proposal_bundles
-- Each proposal and the digest of the bundle file it was stored under, for `verify` to hash.
SELECT proposal_id, bundle_sha256 FROM task_proposals ORDER BY proposal_id;

-- name: log_max_event_id$
SELECT coalesce(max(event_id), 0) FROM events;

-- name: log_head_rows
-- An archived event's id and seal stay in the head (issue 17 item 6).
SELECT e.event_id, s.seal
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
UNION ALL
SELECT event_id, seal FROM archived_events
ORDER BY event_id;

-- fragment: sealed_events
-- Events with their seals' columns (NULL where no seal covers one), as `sealed_event` parses them.
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at, e.actor,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption, s.seal_version, s.row_changes, s.chained_row_digest
FROM events AS e
LEFT JOIN event_seals AS s ON s.event_id = e.event_id

-- name: log_export_all
{{sealed_events}}
ORDER BY e.event_id;

-- name: log_export_task
{{sealed_events}}
WHERE e.task_id = :task_id
ORDER BY e.event_id;

-- name: log_export_task_sealed_rows
SELECT r.event_id, r.position, r.row_table, r.row_key, r.row_digest
FROM events AS e
JOIN event_seal_rows AS r ON r.event_id = e.event_id
WHERE e.task_id = :task_id
ORDER BY r.event_id, r.position;

-- `state_rows_TABLE` (the catalogue of tables') selects each row of a sealed table as `stored`,
-- and as `sealed_history` one of these: whether a row no seal proves may predate sealed rows.

-- fragment: sealed_history_of_tasks
-- A task with events but no sealed row was last written before seals covered rows.
EXISTS (SELECT 1 FROM events AS e WHERE e.task_id = stored.task_id)

-- fragment: sealed_history_of_projections
-- Only a task whose projection was sealed over no rows (a 0.x v1 seal) may hold an unproven row.
EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id = stored.task_id
                 AND e.event_type = 'TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED'
                 AND NOT EXISTS (SELECT 1 FROM event_seal_rows AS r
                                 WHERE r.event_id = e.event_id))

-- fragment: sealed_history_of_recorded_answers
-- An answer whose task has an event older than the first sealed answer may be unproven.
EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id = stored.subject
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'task_idempotency'))

-- fragment: sealed_history_of_bindings
-- While a binding registered before bindings were sealed exists, an unproven one may be it.
EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id IS NULL AND e.event_type = 'GOVERNED_BINDING_REGISTERED'
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'governed_bindings'))

-- fragment: sealed_history_of_runs
-- While a run created before runs were sealed exists, an unproven one may be it.
EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id IS NULL AND e.event_type = 'RUN_CREATED'
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'runs'))

-- fragment: sealed_history_of_run_events
-- A run event appended before appends were sealed is listed in `run_events_before_seals`.
EXISTS (SELECT 1 FROM run_events_before_seals AS b
               WHERE b.run_id = stored.run_id AND stored.seq <= b.last_seq)

-- name: state_rows_gone
-- Rows a seal says were written (with its event id) that are no longer there.
SELECT r.row_table, r.row_key, max(r.event_id) AS event_id
FROM event_seal_rows AS r
GROUP BY r.row_table, r.row_key
HAVING NOT CASE r.row_table
{{state_row_exists}}
  ELSE false
END
ORDER BY r.row_table, r.row_key;

-- name: log_has_seals_before_rows$
-- Whether an older runtime's events were sealed at adoption (a row no seal wrote is unprovable).
SELECT CASE WHEN EXISTS (SELECT 1 FROM event_seals WHERE sealed_at_adoption = 1)
            THEN 1 ELSE 0 END;
