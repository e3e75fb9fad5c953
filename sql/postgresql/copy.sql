-- Copying a whole ledger (`aios-ledger copy`): every table's rows, in key order, with their
-- columns named (the same names on both engines). The table list is shell/log/copy.py's.
-- PostgreSQL's own texts of the statements of ../copy.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../copy.sql.

-- name: copy_event_id_counter$
-- The last event id the source handed out (its archived events' ids are never handed out again).
SELECT greatest(CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END,
                coalesce((SELECT max(event_id) FROM events), 0))
FROM event_ids AS s;

-- Copying a whole ledger into an empty PostgreSQL one (`aios-ledger copy`): one insert per
-- table, the columns the matching `copy_rows_*` read selects.

-- name: copy_insert_tasks!
INSERT INTO tasks(
  {{task_columns}})
VALUES (
  :task_id, :goal, :instructions, :success_criteria_json, :required_capabilities_json,
  :constraints_json, :metadata_json, :deadline, :priority, :max_attempts, :attempt, :status,
  :claimed_by, :lease_token_hash, :lease_expires_at, :result_json, :result_digest,
  :result_idempotency_key, :verification_json, :revision, :created_at, :updated_at,
  :verification_mode, :retry_base_seconds, :retry_max_seconds, :not_before, :seq,
  :awaiting_projection);

-- name: copy_insert_events!
INSERT INTO events(
  event_id, task_id, agent_id, event_type, payload_json, created_at, actor)
VALUES (
  :event_id, :task_id, :agent_id, :event_type, :payload_json, :created_at, :actor);

-- name: copy_insert_event_seals!
INSERT INTO event_seals(
  event_id, chain, chain_seq, prev_seal, seal, sealed_at_adoption, seal_version, row_changes,
  chained_row_digest)
VALUES (
  :event_id, :chain, :chain_seq, :prev_seal, :seal, :sealed_at_adoption, :seal_version,
  :row_changes, :chained_row_digest);

-- name: copy_insert_event_seal_rows!
INSERT INTO event_seal_rows(
  event_id, position, row_table, row_key, row_digest)
VALUES (
  :event_id, :position, :row_table, :row_key, :row_digest);

-- name: copy_insert_archived_events!
INSERT INTO archived_events(
  event_id, archive_event_id, chain, seal)
VALUES (
  :event_id, :archive_event_id, :chain, :seal);

-- name: copy_insert_task_idempotency!
INSERT INTO task_idempotency(
  idempotency_key, operation, subject, request_sha256, response_json, created_at)
VALUES (
  :idempotency_key, :operation, :subject, :request_sha256, :response_json, :created_at);

-- name: copy_insert_task_initial_execution_projections!
INSERT INTO task_initial_execution_projections(
  idempotency_key, task_id, job_id, request_sha256, execution_digest, response_json, created_at)
VALUES (
  :idempotency_key, :task_id, :job_id, :request_sha256, :execution_digest, :response_json,
  :created_at);

-- name: copy_insert_task_source_capture_projection_recoveries!
INSERT INTO task_source_capture_projection_recoveries(
  idempotency_key, task_id, job_id, request_sha256, execution_digest, response_json, created_at)
VALUES (
  :idempotency_key, :task_id, :job_id, :request_sha256, :execution_digest, :response_json,
  :created_at);

-- name: copy_insert_governed_bindings!
INSERT INTO governed_bindings(
  task_id, job_id, binding_json, binding_sha256, created_at)
VALUES (
  :task_id, :job_id, :binding_json, :binding_sha256, :created_at);

-- name: copy_insert_runs!
INSERT INTO runs(
  run_id, session_id, prompt, event_count, created_at, updated_at)
VALUES (
  :run_id, :session_id, :prompt, :event_count, :created_at, :updated_at);

-- name: copy_insert_run_events!
INSERT INTO run_events(
  run_id, seq, kind, payload_json, created_at)
VALUES (
  :run_id, :seq, :kind, :payload_json, :created_at);

-- name: copy_insert_run_events_before_seals!
INSERT INTO run_events_before_seals(run_id, last_seq) VALUES (:run_id, :last_seq);

-- name: copy_insert_auxiliary_runs!
INSERT INTO auxiliary_runs(
  aux_id, session_id, run_id, parent_json, kind, mode, state, spec_json, spec_digest,
  evidence_digest, owner, revision, created_at_ms, updated_at_ms, output_json, output_digest,
  error_code, error)
VALUES (
  :aux_id, :session_id, :run_id, :parent_json, :kind, :mode, :state, :spec_json, :spec_digest,
  :evidence_digest, :owner, :revision, :created_at_ms, :updated_at_ms, :output_json,
  :output_digest, :error_code, :error);

-- name: copy_insert_api_tokens!
INSERT INTO api_tokens(
  name, roles_json, token_sha256, status, revision, created_at, updated_at, capabilities_json)
VALUES (
  :name, :roles_json, :token_sha256, :status, :revision, :created_at, :updated_at,
  :capabilities_json);

-- name: copy_insert_governed_repositories!
INSERT INTO governed_repositories(
  name, path, head_branch, protected_json, revision, created_at, updated_at,
  secrets_baseline_json, secrets_baseline_sha256, scan_max_bytes, scan_max_seconds,
  allow_gitlinks, agent_scan_max_bytes, agent_scan_max_seconds, agent_scan_window_seconds)
VALUES (
  :name, :path, :head_branch, :protected_json, :revision, :created_at, :updated_at,
  :secrets_baseline_json, :secrets_baseline_sha256, :scan_max_bytes, :scan_max_seconds,
  :allow_gitlinks, :agent_scan_max_bytes, :agent_scan_max_seconds, :agent_scan_window_seconds);

-- name: copy_insert_repository_settings_changes!
INSERT INTO repository_settings_changes(
  idempotency_key, repository, request_sha256, revision, response_json, created_at)
VALUES (
  :idempotency_key, :repository, :request_sha256, :revision, :response_json, :created_at);

-- name: copy_insert_task_proposals!
INSERT INTO task_proposals(
  proposal_id, task_id, attempt, repository, agent_id, base_oid, head_oid, bundle_sha256,
  bundle_bytes, refs_json, changed_files_json, facts_json, created_at, scan_bytes,
  scan_seconds)
VALUES (
  :proposal_id, :task_id, :attempt, :repository, :agent_id, :base_oid, :head_oid,
  :bundle_sha256, :bundle_bytes, :refs_json, :changed_files_json, :facts_json, :created_at,
  :scan_bytes, :scan_seconds);

-- name: copy_insert_agent_scan_charges!
INSERT INTO agent_scan_charges(
  charge_id, repository, agent_id, task_id, attempt, bundle_sha256, code, scan_bytes,
  scan_seconds, created_at)
VALUES (
  :charge_id, :repository, :agent_id, :task_id, :attempt, :bundle_sha256, :code, :scan_bytes,
  :scan_seconds, :created_at);

-- name: copy_insert_writer_leases!
INSERT INTO writer_leases(
  lease_id, repository, ref, holder, generation, revision, updated_at)
VALUES (
  :lease_id, :repository, :ref, :holder, :generation, :revision, :updated_at);

-- name: copy_insert_governed_writes!
INSERT INTO governed_writes(
  idempotency_key, task_id, proposal_id, repository, ref, old_oid, new_oid, generation, state,
  code, observed_oid, changed_files_json, revision, created_at, updated_at)
VALUES (
  :idempotency_key, :task_id, :proposal_id, :repository, :ref, :old_oid, :new_oid, :generation,
  :state, :code, :observed_oid, :changed_files_json, :revision, :created_at, :updated_at);

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

-- name: copy_insert_commit_attestations!
INSERT INTO commit_attestations(
  idempotency_key, task_id, repository, commit_oid, keyid, note_json, provenance_sha256,
  review_sha256, created_at)
VALUES (
  :idempotency_key, :task_id, :repository, :commit_oid, :keyid, :note_json, :provenance_sha256,
  :review_sha256, :created_at);

-- name: copy_insert_merkle_leaves!
INSERT INTO merkle_leaves(leaf_index, event_id, leaf_hash, nodes)
VALUES (:leaf_index, :event_id, :leaf_hash, :nodes);

-- name: copy_insert_merkle_tree!
-- Over the empty tree's head row of the target: the source's tree is the target's, leaf for leaf.
INSERT INTO merkle_tree(only_row, size, frontier, revision)
VALUES (:only_row, :size, :frontier, :revision)
ON CONFLICT (only_row) DO UPDATE
SET size = excluded.size, frontier = excluded.frontier, revision = excluded.revision;

-- name: copy_insert_task_spend!
INSERT INTO task_spend(
  spend_key, task_id, attempt, agent_id, repository, day, input_tokens, output_tokens,
  cost_micros, cost_currency, over_budget, created_at)
VALUES (
  :spend_key, :task_id, :attempt, :agent_id, :repository, :day, :input_tokens, :output_tokens,
  :cost_micros, :cost_currency, :over_budget, :created_at);
