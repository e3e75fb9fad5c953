-- Copying a whole ledger (`aios-ledger copy`): every table's rows, in key order, with their
-- columns named (the same names on both engines). The table list is shell/log/copy.py's.

-- name: copy_rows_tasks
SELECT {{task_columns}}
FROM tasks ORDER BY task_id;

-- name: copy_rows_events
SELECT event_id, task_id, agent_id, event_type, payload_json, created_at, actor
FROM events ORDER BY event_id;

-- name: copy_rows_event_seals
SELECT event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version,
       row_changes, chained_row_digest
FROM event_seals ORDER BY event_id;

-- name: copy_rows_event_seal_rows
SELECT event_id, position, row_table, row_key, row_digest
FROM event_seal_rows ORDER BY event_id, position;

-- name: copy_rows_archived_events
SELECT event_id, archive_event_id, chain, seal
FROM archived_events ORDER BY event_id;

-- name: copy_rows_task_idempotency
SELECT idempotency_key, operation, subject, request_sha256, response_json, created_at
FROM task_idempotency ORDER BY idempotency_key;

-- name: copy_rows_task_initial_execution_projections
SELECT idempotency_key, task_id, job_id, request_sha256, execution_digest, response_json,
       created_at
FROM task_initial_execution_projections ORDER BY idempotency_key;

-- name: copy_rows_task_source_capture_projection_recoveries
SELECT idempotency_key, task_id, job_id, request_sha256, execution_digest, response_json,
       created_at
FROM task_source_capture_projection_recoveries ORDER BY idempotency_key;

-- name: copy_rows_governed_bindings
SELECT task_id, job_id, binding_json, binding_sha256, created_at
FROM governed_bindings ORDER BY task_id, job_id;

-- name: copy_rows_runs
SELECT run_id, session_id, prompt, event_count, created_at, updated_at
FROM runs ORDER BY run_id;

-- name: copy_rows_run_events
SELECT run_id, seq, kind, payload_json, created_at
FROM run_events ORDER BY run_id, seq;

-- name: copy_rows_run_events_before_seals
SELECT run_id, last_seq FROM run_events_before_seals ORDER BY run_id;

-- name: copy_rows_auxiliary_runs
SELECT aux_id, session_id, run_id, parent_json, kind, mode, state, spec_json, spec_digest,
       evidence_digest, owner, revision, created_at_ms, updated_at_ms, output_json, output_digest,
       error_code, error
FROM auxiliary_runs ORDER BY aux_id;

-- name: copy_rows_api_tokens
SELECT name, roles_json, token_sha256, status, revision, created_at, updated_at,
       capabilities_json
FROM api_tokens ORDER BY name;

-- name: copy_rows_governed_repositories
SELECT name, path, head_branch, protected_json, revision, created_at, updated_at,
       secrets_baseline_json, secrets_baseline_sha256, scan_max_bytes, scan_max_seconds,
       allow_gitlinks, agent_scan_max_bytes, agent_scan_max_seconds, agent_scan_window_seconds
FROM governed_repositories ORDER BY name;

-- name: copy_rows_repository_settings_changes
SELECT idempotency_key, repository, request_sha256, revision, response_json, created_at
FROM repository_settings_changes ORDER BY idempotency_key;

-- name: copy_rows_task_proposals
SELECT proposal_id, task_id, attempt, repository, agent_id, base_oid, head_oid, bundle_sha256,
       bundle_bytes, refs_json, changed_files_json, facts_json, created_at, scan_bytes,
       scan_seconds
FROM task_proposals ORDER BY proposal_id;

-- name: copy_rows_agent_scan_charges
SELECT charge_id, repository, agent_id, task_id, attempt, bundle_sha256, code, scan_bytes,
       scan_seconds, created_at
FROM agent_scan_charges ORDER BY charge_id;

-- name: copy_rows_writer_leases
SELECT lease_id, repository, ref, holder, generation, revision, updated_at
FROM writer_leases ORDER BY lease_id;

-- name: copy_rows_governed_writes
SELECT idempotency_key, task_id, proposal_id, repository, ref, old_oid, new_oid, generation,
       state, code, observed_oid, changed_files_json, revision, created_at, updated_at
FROM governed_writes ORDER BY idempotency_key;

-- name: copy_rows_commit_attestations
SELECT idempotency_key, task_id, repository, commit_oid, keyid, note_json, provenance_sha256,
       review_sha256, created_at
FROM commit_attestations ORDER BY idempotency_key;

-- name: copy_rows_merkle_leaves
SELECT leaf_index, event_id, leaf_hash, nodes FROM merkle_leaves ORDER BY leaf_index;

-- name: copy_rows_merkle_tree
-- The tree's head row: the target's (an empty tree) takes the source's place.
SELECT only_row, size, frontier, revision FROM merkle_tree;

-- name: copy_rows_task_spend
SELECT spend_key, task_id, attempt, agent_id, repository, day, input_tokens, output_tokens,
       cost_micros, cost_currency, over_budget, created_at
FROM task_spend ORDER BY spend_key;
