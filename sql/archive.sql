-- Archiving finished tasks (issue 17 item 6): reading what would go, and the writes of the
-- archive's plan. Every write takes the task whose chain is archived.

-- name: archive_candidates
-- Finished tasks, with their chain's length and last seal (through the unique (chain,
-- chain_seq) index), in task id order. Which of them were last written before the cut-off is
-- the core's to say (it compares timestamps, not their texts). A task with a governed write
-- keeps its chain: its writes, the writer lease its events sealed and its attestations stay
-- provable (a proposal that was never written goes, with its bundle, into the file). A task
-- whose attempt runs hold evidence goes with its runs, their events and the auxiliary runs that
-- reviewed them (0.x migration 0023 lets its run events go once its chain is listed), unless a run
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

-- name: bundle_still_proposed
-- Whether any proposal left in the ledger names a bundle (an archive removes the file of one
-- that none does, once it committed).
SELECT count(*) AS proposals FROM task_proposals WHERE bundle_sha256 = :bundle_sha256;

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

-- An archived task's rows in its state tables, read with the digest their last seal took
-- (`archive_rows_TABLE`) and deleted, come from the catalogue of tables (`core/sealed_tables.py`).

-- name: delete_archived_sealed_rows!
DELETE FROM event_seal_rows
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);

-- name: delete_archived_seals!
DELETE FROM event_seals
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);

-- name: delete_archived_events!
DELETE FROM events WHERE task_id = :task_id;

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
-- since the archive may have been given. The catalogue of tables renders a key's arm per table
-- an archive takes rows of (`{{archived_key_taken}}`).
SELECT 'seq' AS taken FROM tasks WHERE :row_table = 'tasks' AND seq = :seq
UNION ALL
{{archived_key_taken}};

-- name: delete_restored_listings!
-- After the task's events are back with their seals (the trigger of 0.x migration 0021 lets a
-- listing go only then): their listings. A task's events are listed under one archive event at
-- a time (a restore removes them before any later archive lists them again).
DELETE FROM archived_events
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);
