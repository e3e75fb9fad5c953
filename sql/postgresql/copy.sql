-- Copying a whole ledger into an empty PostgreSQL one: what is not one table's rows.

-- name: copy_event_id_counter$
-- The last event id the source handed out (archived ones too); a preview peeks at it.
SELECT greatest(CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END,
                coalesce((SELECT max(event_id) FROM events), 0))
FROM event_ids AS s;

-- name: copy_set_event_id_counter!
-- The target's sequences go on after the source's ids and creation order.
SELECT setval('event_ids', :last_event_id + 1, false),
       setval('task_seqs', coalesce((SELECT max(seq) FROM tasks), 0) + 1, false);

-- name: copy_target_rows$
-- How many rows the target already holds: a copy goes into an empty ledger only.
SELECT (SELECT count(*) FROM tasks) + (SELECT count(*) FROM events)
     + (SELECT count(*) FROM archived_events) + (SELECT count(*) FROM runs)
     + (SELECT count(*) FROM auxiliary_runs) + (SELECT count(*) FROM governed_bindings)
     + (SELECT count(*) FROM task_idempotency) + (SELECT count(*) FROM api_tokens)
     + (SELECT count(*) FROM governed_repositories);
