-- Reading the sealed event log for verification, heads and exports (issue 3).
-- Every statement streams in event id order; none holds more than one row at a time.
-- SQLite's own texts of the statements of ../event_log.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../event_log.sql.

-- name: log_has_v1_seals$
-- Whether the log's history began under v1 seals (then a row no v2 seal wrote is unprovable).
SELECT EXISTS (SELECT 1 FROM event_seals WHERE seal_version = 1);

-- name: state_rows_tasks
-- Each task row with the last sealed row of it, and whether its chain has any event at all (a
-- task with events but no sealed row was last written under v1 seals). In task id order, the
-- order of `state_task_chain_seals` (whose chains are `task:` and the id), byte by byte.
SELECT t.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e WHERE e.task_id = t.task_id) AS sealed_history
FROM tasks AS t
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'tasks' AND s.row_key = t.task_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'tasks' AND row_key = t.task_id)
ORDER BY t.task_id;

-- name: state_task_chain_seals
-- The seals of every task chain that holds a v4 seal, in chain order (through the unique
-- (chain, chain_seq) index), byte by byte: `verify` folds each chain's v4 changes into the task
-- row they say was written last, beside `state_rows_tasks`.
SELECT s.chain, s.event_id, s.seal_version, s.row_changes, s.chained_row_digest
FROM event_seals AS s
WHERE s.chain IN (SELECT v4.chain FROM event_seals AS v4
                  WHERE v4.seal_version = 4 AND v4.chain >= 'task:' AND v4.chain < 'task;')
ORDER BY s.chain, s.chain_seq;

-- name: state_rows_initial_projections
-- A projection row, with the last sealed row of it; only a task whose projection was sealed
-- under v1 (before migration 0006) may hold a row that no seal proves.
SELECT p.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e JOIN event_seals AS v ON v.event_id = e.event_id
               WHERE e.task_id = p.task_id
                 AND e.event_type = 'TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED'
                 AND v.seal_version = 1) AS sealed_history
FROM task_initial_execution_projections AS p
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'task_initial_execution_projections' AND s.row_key = p.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'task_initial_execution_projections'
                     AND row_key = p.idempotency_key);

-- name: state_rows_source_capture_recoveries
SELECT p.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e JOIN event_seals AS v ON v.event_id = e.event_id
               WHERE e.task_id = p.task_id
                 AND e.event_type = 'TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED'
                 AND v.seal_version = 1) AS sealed_history
FROM task_source_capture_projection_recoveries AS p
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'task_source_capture_projection_recoveries' AND s.row_key = p.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'task_source_capture_projection_recoveries'
                     AND row_key = p.idempotency_key);

-- name: state_rows_api_tokens
SELECT k.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM api_tokens AS k
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'api_tokens' AND s.row_key = k.name
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'api_tokens' AND row_key = k.name);

-- name: state_rows_governed_repositories
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM governed_repositories AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'governed_repositories' AND s.row_key = g.name
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'governed_repositories' AND row_key = g.name);

-- name: state_rows_task_proposals
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM task_proposals AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'task_proposals' AND s.row_key = g.proposal_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'task_proposals' AND row_key = g.proposal_id);

-- name: state_rows_writer_leases
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM writer_leases AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'writer_leases' AND s.row_key = g.lease_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'writer_leases' AND row_key = g.lease_id);

-- name: state_rows_governed_writes
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM governed_writes AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'governed_writes' AND s.row_key = g.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'governed_writes' AND row_key = g.idempotency_key);

-- name: state_rows_repository_settings_changes
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM repository_settings_changes AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'repository_settings_changes' AND s.row_key = g.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'repository_settings_changes'
                     AND row_key = g.idempotency_key);

-- name: state_rows_agent_scan_charges
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM agent_scan_charges AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'agent_scan_charges' AND s.row_key = g.charge_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'agent_scan_charges' AND row_key = g.charge_id);

-- name: state_rows_commit_attestations
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM commit_attestations AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'commit_attestations' AND s.row_key = g.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'commit_attestations' AND row_key = g.idempotency_key);

-- name: state_rows_task_spend
SELECT g.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       NULL AS sealed_history
FROM task_spend AS g
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'task_spend' AND s.row_key = g.spend_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'task_spend' AND row_key = g.spend_key);

-- name: state_rows_task_idempotency
-- Each first answer with the last sealed row of it. A first answer stored before the ledger
-- sealed them (its task has an event older than the first sealed first answer) may hold a row
-- that no seal proves; one whose task has no such event must have been sealed.
SELECT i.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id = i.subject
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'task_idempotency')) AS sealed_history
FROM task_idempotency AS i
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'task_idempotency' AND s.row_key = i.idempotency_key
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'task_idempotency' AND row_key = i.idempotency_key);

-- name: state_rows_governed_bindings
-- Each binding, keyed `TASK_ID JOB_ID` (identifiers hold no space), with the last sealed row of
-- it. While the ledger holds a binding registered before it sealed them, a binding that no seal
-- proves may be one of those.
SELECT b.*, b.task_id || ' ' || b.job_id AS binding_key,
       s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id IS NULL AND e.event_type = 'GOVERNED_BINDING_REGISTERED'
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'governed_bindings')) AS sealed_history
FROM governed_bindings AS b
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'governed_bindings' AND s.row_key = b.task_id || ' ' || b.job_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'governed_bindings'
                     AND row_key = b.task_id || ' ' || b.job_id);

-- name: state_rows_runs
-- Each run with the last sealed row of it (its RUN_CREATED event's). While the ledger holds a
-- run created before it sealed them, a run that no seal proves may be one of those.
SELECT r.*, s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM events AS e
               WHERE e.task_id IS NULL AND e.event_type = 'RUN_CREATED'
                 AND e.event_id < (SELECT coalesce(min(event_id), 9223372036854775807)
                                   FROM event_seal_rows
                                   WHERE row_table = 'runs')) AS sealed_history
FROM runs AS r
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'runs' AND s.row_key = r.run_id
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'runs' AND row_key = r.run_id);

-- name: state_rows_run_events
-- Each run event, keyed `RUN_ID SEQ` (identifiers hold no space), with the sealed row of it
-- (its RUN_EVENT_APPENDED event's). An event appended before appends were sealed is one that
-- migration 0014 listed (`run_events_before_seals`): no seal proves it either way; any other
-- run event must have been sealed.
SELECT e.*, e.run_id || ' ' || e.seq AS run_event_key,
       s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,
       EXISTS (SELECT 1 FROM run_events_before_seals AS b
               WHERE b.run_id = e.run_id AND e.seq <= b.last_seq) AS sealed_history
FROM run_events AS e
LEFT JOIN event_seal_rows AS s
  ON s.row_table = 'run_events' AND s.row_key = e.run_id || ' ' || e.seq
 AND s.event_id = (SELECT max(event_id) FROM event_seal_rows
                   WHERE row_table = 'run_events' AND row_key = e.run_id || ' ' || e.seq);

-- name: state_rows_gone
-- Rows a seal says were written (their last writer's event id) that are no longer there.
SELECT r.row_table, r.row_key, max(r.event_id) AS event_id
FROM event_seal_rows AS r
GROUP BY r.row_table, r.row_key
HAVING NOT CASE r.row_table
  WHEN 'tasks' THEN EXISTS (SELECT 1 FROM tasks WHERE task_id = r.row_key)
  WHEN 'auxiliary_runs' THEN EXISTS (SELECT 1 FROM auxiliary_runs WHERE aux_id = r.row_key)
  WHEN 'task_initial_execution_projections' THEN EXISTS (
    SELECT 1 FROM task_initial_execution_projections WHERE idempotency_key = r.row_key)
  WHEN 'task_source_capture_projection_recoveries' THEN EXISTS (
    SELECT 1 FROM task_source_capture_projection_recoveries WHERE idempotency_key = r.row_key)
  WHEN 'api_tokens' THEN EXISTS (SELECT 1 FROM api_tokens WHERE name = r.row_key)
  WHEN 'governed_repositories' THEN EXISTS (
    SELECT 1 FROM governed_repositories WHERE name = r.row_key)
  WHEN 'task_proposals' THEN EXISTS (SELECT 1 FROM task_proposals WHERE proposal_id = r.row_key)
  WHEN 'writer_leases' THEN EXISTS (SELECT 1 FROM writer_leases WHERE lease_id = r.row_key)
  WHEN 'governed_writes' THEN EXISTS (
    SELECT 1 FROM governed_writes WHERE idempotency_key = r.row_key)
  WHEN 'task_idempotency' THEN EXISTS (
    SELECT 1 FROM task_idempotency WHERE idempotency_key = r.row_key)
  WHEN 'governed_bindings' THEN EXISTS (
    SELECT 1 FROM governed_bindings WHERE task_id || ' ' || job_id = r.row_key)
  WHEN 'runs' THEN EXISTS (SELECT 1 FROM runs WHERE run_id = r.row_key)
  WHEN 'repository_settings_changes' THEN EXISTS (
    SELECT 1 FROM repository_settings_changes WHERE idempotency_key = r.row_key)
  -- `RUN_ID SEQ`: looked up by its primary key, then held to the key exactly.
  WHEN 'run_events' THEN EXISTS (
    SELECT 1 FROM run_events
    WHERE run_id = substr(r.row_key, 1, instr(r.row_key, ' ') - 1)
      AND seq = CAST(substr(r.row_key, instr(r.row_key, ' ') + 1) AS INTEGER)
      AND run_id || ' ' || seq = r.row_key)
  WHEN 'agent_scan_charges' THEN EXISTS (
    SELECT 1 FROM agent_scan_charges WHERE charge_id = r.row_key)
  WHEN 'commit_attestations' THEN EXISTS (
    SELECT 1 FROM commit_attestations WHERE idempotency_key = r.row_key)
  WHEN 'task_spend' THEN EXISTS (
    SELECT 1 FROM task_spend WHERE spend_key = r.row_key)
  ELSE 0
END
ORDER BY r.row_table, r.row_key;

-- name: log_id_counter$
-- The last event id AUTOINCREMENT handed out (NULL before the first event).
SELECT seq FROM sqlite_sequence WHERE name = 'events';
