-- Archiving finished tasks (issue 17 item 6): reading what would go, and the writes of the
-- archive's plan. Every write takes the task whose chain is archived.

-- name: archive_candidates
-- Finished tasks, with their chain's length and last seal (through the unique (chain,
-- chain_seq) index), in task id order. Which of them were last written before the cut-off is
-- the core's to say (it compares timestamps, not their texts). A task with a governed write
-- keeps its chain: its writes, the writer lease its events sealed and its attestations stay
-- provable (a proposal that was never written goes, with its bundle, into the file). A task
-- whose attempt runs hold evidence goes with its runs, their events and the auxiliary runs that
-- reviewed them (migration 0023 lets its run events go once its chain is listed), unless a run
-- of it holds events appended before appends were sealed (0014 listed those runs for good, and
-- no seal proves what the archive would keep of them).
SELECT t.task_id, t.status, t.revision, t.updated_at,
       (SELECT count(*) FROM events AS e WHERE e.task_id = t.task_id) AS events,
       s.event_id AS last_event_id, s.seal AS last_seal
FROM tasks AS t
LEFT JOIN event_seals AS s
  ON s.chain = 'task:' || t.task_id
 AND s.chain_seq = (SELECT max(chain_seq) FROM event_seals WHERE chain = 'task:' || t.task_id)
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
  AND NOT EXISTS (SELECT 1 FROM governed_writes AS g WHERE g.task_id = t.task_id)
  AND NOT EXISTS (SELECT 1 FROM runs AS r JOIN run_events_before_seals AS b ON b.run_id = r.run_id
                  WHERE r.session_id = 'task:' || t.task_id)
ORDER BY t.task_id;

-- name: archive_candidate_events
-- The events of finished tasks with their seals, in event id order (an archive file holds
-- those of the tasks archived, in the order the offline check reads them).
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at, e.actor,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption, s.seal_version, s.row_changes, s.chained_row_digest
FROM events AS e
JOIN tasks AS t ON t.task_id = e.task_id
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
  AND NOT EXISTS (SELECT 1 FROM governed_writes AS g WHERE g.task_id = t.task_id)
  AND NOT EXISTS (SELECT 1 FROM runs AS r JOIN run_events_before_seals AS b ON b.run_id = r.run_id
                  WHERE r.session_id = 'task:' || t.task_id)
ORDER BY e.event_id;

-- name: archive_candidate_sealed_rows
SELECT r.event_id, r.position, r.row_table, r.row_key, r.row_digest
FROM events AS e
JOIN tasks AS t ON t.task_id = e.task_id
JOIN event_seal_rows AS r ON r.event_id = e.event_id
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
  AND NOT EXISTS (SELECT 1 FROM governed_writes AS g WHERE g.task_id = t.task_id)
  AND NOT EXISTS (SELECT 1 FROM runs AS r JOIN run_events_before_seals AS b ON b.run_id = r.run_id
                  WHERE r.session_id = 'task:' || t.task_id)
ORDER BY r.event_id, r.position;

-- name: archive_task_rows
-- The task's row, with the digest the last seal that wrote it took.
SELECT t.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'tasks' AND s.row_key = t.task_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM tasks AS t WHERE t.task_id = :task_id;

-- name: archive_task_projection_rows
SELECT p.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'task_initial_execution_projections'
          AND s.row_key = p.idempotency_key
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM task_initial_execution_projections AS p WHERE p.task_id = :task_id;

-- name: archive_task_recovery_rows
SELECT r.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'task_source_capture_projection_recoveries'
          AND s.row_key = r.idempotency_key
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM task_source_capture_projection_recoveries AS r WHERE r.task_id = :task_id;

-- name: archive_task_first_answer_rows
SELECT i.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'task_idempotency' AND s.row_key = i.idempotency_key
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM task_idempotency AS i WHERE i.subject = :task_id;

-- name: archive_task_binding_rows
-- The task's governed bindings, keyed `TASK_ID JOB_ID`, each with the digest its
-- GOVERNED_BINDING_REGISTERED seal (the ledger chain's) took.
SELECT b.*, b.task_id || ' ' || b.job_id AS binding_key,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'governed_bindings' AND s.row_key = b.task_id || ' ' || b.job_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM governed_bindings AS b WHERE b.task_id = :task_id
ORDER BY b.job_id;

-- name: archive_task_run_rows
-- The task's attempt runs (`TASK@N`, in its session `task:TASK`), which its claims created and
-- its chain sealed.
SELECT r.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'runs' AND s.row_key = r.run_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM runs AS r WHERE r.session_id = 'task:' || :task_id
ORDER BY r.run_id;

-- name: archive_task_run_event_rows
-- The events of the task's attempt runs, keyed `RUN_ID SEQ`, each with the digest its
-- RUN_EVENT_APPENDED seal (the ledger chain's) took.
SELECT e.*, e.run_id || ' ' || e.seq AS run_event_key,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'run_events' AND s.row_key = e.run_id || ' ' || e.seq
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM run_events AS e JOIN runs AS r ON r.run_id = e.run_id
WHERE r.session_id = 'task:' || :task_id
ORDER BY e.run_id, e.seq;

-- name: archive_task_auxiliary_rows
-- The auxiliary runs whose target is one of the task's attempt runs (its reviews), each with
-- the digest its last transition's seal (the ledger chain's) took.
SELECT a.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'auxiliary_runs' AND s.row_key = a.aux_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM auxiliary_runs AS a WHERE a.session_id = 'task:' || :task_id
ORDER BY a.aux_id;

-- name: archive_task_ledger_rows
-- The rows of the task that seals of the ledger chain cover (its run events, auxiliary runs
-- and governed bindings), each with the event id of the last seal that wrote it: what the
-- TASKS_ARCHIVED event records it removed, in table and key order.
SELECT s.row_table, s.row_key, max(s.event_id) AS event_id
FROM event_seal_rows AS s
WHERE (s.row_table = 'run_events' AND s.row_key IN (
         SELECT e.run_id || ' ' || e.seq FROM run_events AS e JOIN runs AS r
           ON r.run_id = e.run_id WHERE r.session_id = 'task:' || :task_id))
   OR (s.row_table = 'auxiliary_runs' AND s.row_key IN (
         SELECT a.aux_id FROM auxiliary_runs AS a WHERE a.session_id = 'task:' || :task_id))
   OR (s.row_table = 'governed_bindings' AND s.row_key IN (
         SELECT b.task_id || ' ' || b.job_id FROM governed_bindings AS b
         WHERE b.task_id = :task_id))
GROUP BY s.row_table, s.row_key
ORDER BY s.row_table, s.row_key;

-- name: archive_ledger_row_seal
-- The last seal of a row, its event id and the digest it took (verify-archive holds a row the
-- ledger chain sealed against it).
SELECT event_id, row_digest FROM event_seal_rows
WHERE row_table = :row_table AND row_key = :row_key
ORDER BY event_id DESC LIMIT 1;

-- name: archive_task_proposal_rows
SELECT p.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'task_proposals' AND s.row_key = p.proposal_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM task_proposals AS p WHERE p.task_id = :task_id
ORDER BY p.proposal_id;

-- name: archive_task_scan_charge_rows
SELECT c.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'agent_scan_charges' AND s.row_key = c.charge_id
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM agent_scan_charges AS c WHERE c.task_id = :task_id
ORDER BY c.charge_id;

-- name: archive_task_spend_rows
SELECT sp.*,
       (SELECT s.row_digest FROM event_seal_rows AS s
        WHERE s.row_table = 'task_spend' AND s.row_key = sp.spend_key
        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest
FROM task_spend AS sp WHERE sp.task_id = :task_id
ORDER BY sp.spend_key;

-- name: bundle_still_proposed
-- Whether any proposal left in the ledger names a bundle (an archive removes the file of one
-- that none does, once it committed).
SELECT count(*) AS proposals FROM task_proposals WHERE bundle_sha256 = :bundle_sha256;

-- name: archived_event_rows
-- Every archived event's id, chain, seal and the TASKS_ARCHIVED event that lists it, in id order.
SELECT event_id, archive_event_id, chain, seal FROM archived_events ORDER BY event_id;

-- name: archived_chains_listed
-- The chains archived now (a restored chain's listings are gone).
SELECT DISTINCT chain FROM archived_events;

-- name: archive_events_recorded
-- Every TASKS_ARCHIVED event of the ledger chain, for checking an archive file against them.
SELECT e.event_id, e.payload_json
FROM events AS e JOIN event_seals AS s ON s.event_id = e.event_id
WHERE e.task_id IS NULL AND e.event_type = 'TASKS_ARCHIVED'
ORDER BY e.event_id;

-- name: list_archived_events!
-- Listed before they are deleted: the append-only triggers allow deleting listed events only.
INSERT INTO archived_events(event_id, archive_event_id, chain, seal)
SELECT e.event_id, :archive_event_id, s.chain, s.seal
FROM events AS e JOIN event_seals AS s ON s.event_id = e.event_id
WHERE e.task_id = :task_id;

-- name: delete_archived_sealed_rows!
DELETE FROM event_seal_rows
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);

-- name: delete_archived_seals!
DELETE FROM event_seals
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);

-- name: delete_archived_events!
DELETE FROM events WHERE task_id = :task_id;

-- name: delete_archived_idempotency!
DELETE FROM task_idempotency WHERE subject = :task_id;

-- name: delete_archived_projections!
DELETE FROM task_initial_execution_projections WHERE task_id = :task_id;

-- name: delete_archived_recoveries!
DELETE FROM task_source_capture_projection_recoveries WHERE task_id = :task_id;

-- name: delete_archived_bindings!
DELETE FROM governed_bindings WHERE task_id = :task_id;

-- name: delete_archived_run_events!
-- The events of the task's attempt runs: the trigger of migration 0023 lets them go, the task's
-- chain being listed by now.
DELETE FROM run_events
WHERE run_id IN (SELECT run_id FROM runs WHERE session_id = 'task:' || :task_id);

-- name: delete_archived_auxiliary_runs!
DELETE FROM auxiliary_runs WHERE session_id = 'task:' || :task_id;

-- name: delete_archived_runs!
-- The task's attempt runs (`TASK@N`, session `task:TASK`), their events gone before.
DELETE FROM runs WHERE session_id = 'task:' || :task_id;

-- name: delete_archived_proposals!
DELETE FROM task_proposals WHERE task_id = :task_id;

-- name: delete_archived_scan_charges!
DELETE FROM agent_scan_charges WHERE task_id = :task_id;

-- name: delete_archived_spend!
DELETE FROM task_spend WHERE task_id = :task_id;

-- name: delete_archived_task!
DELETE FROM tasks WHERE task_id = :task_id AND revision = :expected_revision;

-- Restoring an archive (issue 28 part 7): the reads the restore decides on, and the one write of
-- its plan that is restore's own (the rows go back through the statements that first wrote them).

-- name: restore_archive_listings
-- The listings an archive event still holds (those of chains not restored since), in id order.
SELECT event_id, chain, seal FROM archived_events
WHERE archive_event_id = :archive_event_id
ORDER BY event_id;

-- name: restore_row_taken
-- Whether a row a restore would put back is taken now: its key (`taken` = 'key') in its state
-- table, or for a task row its creation sequence too (`taken` = 'seq'), which a task created
-- since the archive may have been given.
SELECT 'key' AS taken FROM tasks WHERE :row_table = 'tasks' AND task_id = :row_key
UNION ALL
SELECT 'seq' FROM tasks WHERE :row_table = 'tasks' AND seq = :seq
UNION ALL
SELECT 'key' FROM task_idempotency
WHERE :row_table = 'task_idempotency' AND idempotency_key = :row_key
UNION ALL
SELECT 'key' FROM governed_bindings
WHERE :row_table = 'governed_bindings' AND task_id || ' ' || job_id = :row_key
UNION ALL
SELECT 'key' FROM task_initial_execution_projections
WHERE :row_table = 'task_initial_execution_projections' AND idempotency_key = :row_key
UNION ALL
SELECT 'key' FROM task_source_capture_projection_recoveries
WHERE :row_table = 'task_source_capture_projection_recoveries' AND idempotency_key = :row_key
UNION ALL
SELECT 'key' FROM runs WHERE :row_table = 'runs' AND run_id = :row_key
UNION ALL
SELECT 'key' FROM auxiliary_runs WHERE :row_table = 'auxiliary_runs' AND aux_id = :row_key
UNION ALL
SELECT 'key' FROM run_events
WHERE :row_table = 'run_events' AND run_id || ' ' || seq = :row_key
UNION ALL
SELECT 'key' FROM task_proposals WHERE :row_table = 'task_proposals' AND proposal_id = :row_key
UNION ALL
SELECT 'key' FROM agent_scan_charges
WHERE :row_table = 'agent_scan_charges' AND charge_id = :row_key
UNION ALL
SELECT 'key' FROM task_spend WHERE :row_table = 'task_spend' AND spend_key = :row_key;

-- name: delete_restored_listings!
-- After the task's events are back with their seals (the trigger of migration 0021 lets a
-- listing go only then): their listings. A task's events are listed under one archive event at
-- a time (a restore removes them before any later archive lists them again).
DELETE FROM archived_events
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);

-- name: restore_run!
INSERT INTO runs(run_id, session_id, prompt, event_count, created_at, updated_at)
VALUES (:run_id, :session_id, :prompt, :event_count, :created_at, :updated_at);

-- name: restore_auxiliary_run!
INSERT INTO auxiliary_runs(aux_id, session_id, run_id, parent_json, kind, mode, state,
                           spec_json, spec_digest, evidence_digest, owner, revision,
                           created_at_ms, updated_at_ms, output_json, output_digest,
                           error_code, error)
VALUES (:aux_id, :session_id, :run_id, :parent_json, :kind, :mode, :state, :spec_json,
        :spec_digest, :evidence_digest, :owner, :revision, :created_at_ms, :updated_at_ms,
        :output_json, :output_digest, :error_code, :error);
