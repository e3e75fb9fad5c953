-- Archiving finished tasks: reading what would go, and the writes of the archive's plan.

-- fragment: archivable_task
-- A finished task `t` whose chain may go: a governed write keeps its chain (its writes stay
-- provable), and so does a run of it holding events appended before appends were sealed.
t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
  AND NOT EXISTS (SELECT 1 FROM governed_writes AS g WHERE g.task_id = t.task_id)
  AND NOT EXISTS (SELECT 1 FROM runs AS r JOIN run_events_before_seals AS b ON b.run_id = r.run_id
                  WHERE r.session_id = 'task:' || t.task_id)

-- name: archive_candidates
-- Archivable tasks with their chain's length and last seal; which were last written before the
-- cut-off is the core's to say (it compares timestamps, not their texts).
SELECT t.task_id, t.status, t.revision, t.updated_at,
       (SELECT count(*) FROM events AS e WHERE e.task_id = t.task_id) AS events,
       s.event_id AS last_event_id, s.seal AS last_seal
FROM tasks AS t
LEFT JOIN event_seals AS s
  ON s.chain = 'task:' || t.task_id
 AND s.chain_seq = (SELECT max(chain_seq) FROM event_seals WHERE chain = 'task:' || t.task_id)
WHERE {{archivable_task}}
ORDER BY t.task_id;

-- name: archive_candidate_events
-- The events of archivable tasks with their seals, in the order the offline check reads them.
{{sealed_events}}
JOIN tasks AS t ON t.task_id = e.task_id
WHERE {{archivable_task}}
ORDER BY e.event_id;

-- name: archive_candidate_sealed_rows
SELECT r.event_id, r.position, r.row_table, r.row_key, r.row_digest
FROM events AS e
JOIN tasks AS t ON t.task_id = e.task_id
JOIN event_seal_rows AS r ON r.event_id = e.event_id
WHERE {{archivable_task}}
ORDER BY r.event_id, r.position;

-- name: archive_task_ledger_rows
-- The task's rows that the ledger chain's seals cover, each with its last seal's event id: what
-- the TASKS_ARCHIVED event records it removed.
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
-- The last seal of a row (verify-archive holds a row the ledger chain sealed against it).
SELECT event_id, row_digest FROM event_seal_rows
WHERE row_table = :row_table AND row_key = :row_key
ORDER BY event_id DESC LIMIT 1;

-- name: bundle_still_proposed
-- Whether any proposal left names a bundle (an archive removes the file of one none does).
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

-- An archived task's rows in its state tables are read and deleted by the catalogue of tables'
-- statements (`archive_rows_TABLE`, `core/sealed_tables.py`).

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

-- Restoring an archive: the rows go back through the statements that first wrote them.

-- name: restore_archive_listings
-- The listings an archive event still holds (those of chains not restored since), in id order.
SELECT event_id, chain, seal FROM archived_events
WHERE archive_event_id = :archive_event_id
ORDER BY event_id;

-- name: restore_row_taken
-- Whether a row a restore would put back is taken now: its key, or a task's creation sequence
-- (a task created since may have been given it).
SELECT 'seq' AS taken FROM tasks WHERE :row_table = 'tasks' AND seq = :seq
UNION ALL
{{archived_key_taken}};

-- name: delete_restored_listings!
-- Once the task's events are back with their seals (a trigger lets a listing go only then).
DELETE FROM archived_events
WHERE event_id IN (SELECT event_id FROM events WHERE task_id = :task_id);
