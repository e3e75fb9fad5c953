-- PostgreSQL's texts of ../auxiliary.sql's statements that differ on SQLite, and its own.

-- name: auxiliary_run_events
-- The transitions of one auxiliary run, as appended (and sealed) to the ledger-level chain.
SELECT e.event_id, e.event_type, e.payload_json, e.created_at, e.actor, s.chain, s.chain_seq
FROM events AS e JOIN event_seals AS s ON s.event_id = e.event_id
WHERE e.task_id IS NULL AND e.event_type LIKE 'AUXILIARY_RUN_%'
  AND (e.payload_json::jsonb ->> 'aux_id') = :aux_id
ORDER BY e.event_id;
