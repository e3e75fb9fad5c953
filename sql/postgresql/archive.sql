-- Archiving finished tasks (issue 17 item 6): reading what would go, and the writes of the
-- archive's plan. Every write takes the task whose chain is archived.
-- PostgreSQL's own texts of the statements of ../archive.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../archive.sql.

-- name: archive_candidates
-- Finished tasks, with their chain's length and last seal (through the unique (chain,
-- chain_seq) index), in task id order. Which of them were last written before the cut-off is
-- the core's to say (it compares timestamps, not their texts).
SELECT t.task_id, t.status, t.revision, t.updated_at,
       (SELECT count(*) FROM events AS e WHERE e.task_id = t.task_id) AS events,
       s.event_id AS last_event_id, s.seal AS last_seal
FROM tasks AS t
LEFT JOIN event_seals AS s
  ON s.chain = 'task:' || t.task_id
 AND s.chain_seq = (SELECT max(chain_seq) FROM event_seals WHERE chain = 'task:' || t.task_id)
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
ORDER BY t.task_id;

-- name: archive_candidate_events
-- The events of finished tasks with their seals, in event id order (an archive file holds
-- those of the tasks archived, in the order the offline check reads them).
SELECT e.event_id, e.task_id, e.agent_id, e.event_type, e.payload_json, e.created_at,
       s.event_id AS seal_event_id, s.chain, s.chain_seq, s.prev_seal, s.seal,
       s.sealed_at_adoption, s.seal_version, s.row_changes, s.chained_row_digest
FROM events AS e
JOIN tasks AS t ON t.task_id = e.task_id
LEFT JOIN event_seals AS s ON s.event_id = e.event_id
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
ORDER BY e.event_id;

-- name: archive_candidate_sealed_rows
SELECT r.event_id, r.position, r.row_table, r.row_key, r.row_digest
FROM events AS e
JOIN tasks AS t ON t.task_id = e.task_id
JOIN event_seal_rows AS r ON r.event_id = e.event_id
WHERE t.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
ORDER BY r.event_id, r.position;
