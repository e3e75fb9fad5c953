-- migrate:up
-- The aios-ledger 1.0 schema on PostgreSQL, as pg_dump writes it. Names are unqualified: they
-- live in the search_path's schema (dbmate: ?search_path=...). Columns keep SQLite's names,
-- order and values, so rows digest alike on both engines. A 0.x ledger is brought here by
-- `aios-ledger upgrade`, not by this file.

CREATE FUNCTION capabilities_offered(required_json text, offered_json text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
  RETURN NOT EXISTS (
    SELECT 1 FROM jsonb_array_elements_text(required_json::jsonb) AS required(name)
    WHERE NOT offered_json::jsonb ? required.name
  );
EXCEPTION WHEN others THEN
  RETURN false;
END;
$$;

CREATE FUNCTION refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] IN ('archivable', 'restorable') THEN
    IF TG_ARGV[1] = 'archivable'
       AND EXISTS (SELECT 1 FROM archived_events WHERE event_id = OLD.event_id) THEN
      RETURN OLD;
    END IF;
    IF TG_ARGV[1] = 'restorable'
       AND EXISTS (SELECT 1 FROM events WHERE event_id = OLD.event_id) THEN
      RETURN OLD;
    END IF;
  END IF;
  IF TG_OP = 'DELETE' AND TG_NARGS > 1 AND TG_ARGV[1] = 'run-archivable' THEN
    IF EXISTS (SELECT 1 FROM runs AS r JOIN archived_events AS a ON a.chain = r.session_id
               WHERE r.run_id = OLD.run_id) THEN
      RETURN OLD;
    END IF;
  END IF;
  RAISE EXCEPTION 'EVENTS_APPEND_ONLY: %', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE FUNCTION tasks_seq_required() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF NEW.seq IS NULL THEN
    RAISE EXCEPTION 'TASK_SEQ_REQUIRED: a task needs its creation sequence'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TABLE agent_scan_charges (
    charge_id text NOT NULL,
    repository text NOT NULL,
    agent_id text NOT NULL,
    task_id text NOT NULL,
    attempt bigint NOT NULL,
    bundle_sha256 text NOT NULL,
    code text NOT NULL,
    scan_bytes bigint NOT NULL,
    scan_seconds double precision NOT NULL,
    created_at text NOT NULL,
    CONSTRAINT agent_scan_charges_scan_bytes_check CHECK ((scan_bytes >= 0)),
    CONSTRAINT agent_scan_charges_scan_seconds_check CHECK ((scan_seconds >= (0)::double precision))
);

CREATE TABLE api_tokens (
    name text NOT NULL,
    roles_json text NOT NULL,
    token_sha256 text NOT NULL,
    status text NOT NULL,
    revision bigint NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    capabilities_json text,
    CONSTRAINT api_tokens_revision_check CHECK ((revision >= 1)),
    CONSTRAINT api_tokens_status_check CHECK ((status = ANY (ARRAY['ACTIVE'::text, 'REVOKED'::text]))),
    CONSTRAINT api_tokens_token_sha256_check CHECK ((length(token_sha256) = 64))
);

CREATE TABLE archived_events (
    event_id bigint NOT NULL,
    archive_event_id bigint NOT NULL,
    chain text NOT NULL,
    seal text NOT NULL,
    CONSTRAINT archived_events_check CHECK ((archive_event_id > event_id))
);

CREATE TABLE auxiliary_runs (
    aux_id text NOT NULL,
    session_id text NOT NULL,
    run_id text NOT NULL,
    parent_json text NOT NULL,
    kind text NOT NULL,
    mode text NOT NULL,
    state text NOT NULL,
    spec_json text NOT NULL,
    spec_digest text NOT NULL,
    evidence_digest text NOT NULL,
    owner text NOT NULL,
    revision bigint DEFAULT 1 NOT NULL,
    created_at_ms bigint NOT NULL,
    updated_at_ms bigint NOT NULL,
    output_json text,
    output_digest text,
    error_code text,
    error text,
    CONSTRAINT auxiliary_runs_check CHECK ((updated_at_ms >= created_at_ms)),
    CONSTRAINT auxiliary_runs_check1 CHECK (((state = 'COMPLETED'::text) = ((output_digest IS NOT NULL) AND (output_json IS NOT NULL)))),
    CONSTRAINT auxiliary_runs_check2 CHECK (((output_digest IS NULL) = (output_json IS NULL))),
    CONSTRAINT auxiliary_runs_check3 CHECK (((state = ANY (ARRAY['FAILED'::text, 'CANCELLED'::text])) = ((error IS NOT NULL) AND (error_code IS NOT NULL)))),
    CONSTRAINT auxiliary_runs_check4 CHECK (((error IS NULL) = (error_code IS NULL))),
    CONSTRAINT auxiliary_runs_created_at_ms_check CHECK ((created_at_ms >= 0)),
    CONSTRAINT auxiliary_runs_mode_check CHECK ((mode = 'ISOLATED'::text)),
    CONSTRAINT auxiliary_runs_revision_check CHECK ((revision >= 1)),
    CONSTRAINT auxiliary_runs_state_check CHECK ((state = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])))
);

CREATE TABLE checkpoint_cosignatures (
    checkpoint_id bigint NOT NULL,
    witness_name text NOT NULL,
    witness_key_id text NOT NULL,
    cosigned_at bigint NOT NULL,
    line text NOT NULL,
    received_at text NOT NULL,
    CONSTRAINT checkpoint_cosignatures_cosigned_at_check CHECK ((cosigned_at >= 0)),
    CONSTRAINT checkpoint_cosignatures_witness_key_id_check CHECK ((length(witness_key_id) = 8)),
    CONSTRAINT checkpoint_cosignatures_witness_name_check CHECK (((length(witness_name) >= 1) AND (length(witness_name) <= 255)))
);

CREATE TABLE checkpoints (
    checkpoint_id bigint NOT NULL,
    origin text NOT NULL,
    tree_size bigint NOT NULL,
    root_hash bytea NOT NULL,
    key_id text NOT NULL,
    note text NOT NULL,
    signed_at text NOT NULL,
    CONSTRAINT checkpoints_key_id_check CHECK ((length(key_id) = 8)),
    CONSTRAINT checkpoints_origin_check CHECK (((length(origin) >= 1) AND (length(origin) <= 255))),
    CONSTRAINT checkpoints_root_hash_check CHECK ((octet_length(root_hash) = 32)),
    CONSTRAINT checkpoints_tree_size_check CHECK ((tree_size >= 0))
);

CREATE SEQUENCE checkpoints_checkpoint_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE checkpoints_checkpoint_id_seq OWNED BY checkpoints.checkpoint_id;

CREATE TABLE commit_attestations (
    idempotency_key text NOT NULL,
    task_id text NOT NULL,
    repository text NOT NULL,
    commit_oid text NOT NULL,
    keyid text NOT NULL,
    note_json text NOT NULL,
    provenance_sha256 text NOT NULL,
    review_sha256 text NOT NULL,
    created_at text NOT NULL
);

CREATE SEQUENCE event_ids
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE event_seal_rows (
    event_id bigint NOT NULL,
    "position" bigint NOT NULL,
    row_table text NOT NULL,
    row_key text NOT NULL,
    row_digest text NOT NULL,
    CONSTRAINT event_seal_rows_position_check CHECK (("position" >= 1))
);

CREATE TABLE event_seals (
    event_id bigint NOT NULL,
    chain text NOT NULL,
    chain_seq bigint NOT NULL,
    prev_seal text NOT NULL,
    seal text NOT NULL,
    sealed_at_adoption bigint DEFAULT 0 NOT NULL,
    seal_version bigint DEFAULT 5 NOT NULL,
    row_changes text,
    chained_row_digest text,
    CONSTRAINT event_seals_chain_seq_check CHECK ((chain_seq >= 1)),
    CONSTRAINT event_seals_seal_version_check CHECK ((seal_version = 5)),
    CONSTRAINT event_seals_sealed_at_adoption_check CHECK ((sealed_at_adoption = ANY (ARRAY[(0)::bigint, (1)::bigint])))
);

CREATE TABLE events (
    event_id bigint NOT NULL,
    task_id text,
    agent_id text,
    event_type text NOT NULL,
    payload_json text NOT NULL,
    created_at text NOT NULL,
    actor text,
    CONSTRAINT events_event_id_check CHECK ((event_id >= 1))
);

CREATE TABLE governed_bindings (
    task_id text NOT NULL,
    job_id text NOT NULL,
    binding_json text NOT NULL,
    binding_sha256 text NOT NULL,
    created_at text NOT NULL
);

CREATE TABLE governed_repositories (
    name text NOT NULL,
    path text NOT NULL,
    head_branch text,
    protected_json text NOT NULL,
    revision bigint NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    secrets_baseline_json text,
    secrets_baseline_sha256 text,
    scan_max_bytes bigint DEFAULT 67108864 NOT NULL,
    scan_max_seconds double precision DEFAULT 20.0 NOT NULL,
    allow_gitlinks bigint DEFAULT 0 NOT NULL,
    agent_scan_max_bytes bigint DEFAULT 1073741824 NOT NULL,
    agent_scan_max_seconds double precision DEFAULT 600.0 NOT NULL,
    agent_scan_window_seconds bigint DEFAULT 3600 NOT NULL,
    pull_request_json text,
    remote_url text,
    CONSTRAINT governed_repositories_agent_scan_max_bytes_check CHECK ((agent_scan_max_bytes >= 1)),
    CONSTRAINT governed_repositories_agent_scan_max_seconds_check CHECK ((agent_scan_max_seconds > (0)::double precision)),
    CONSTRAINT governed_repositories_agent_scan_window_seconds_check CHECK ((agent_scan_window_seconds >= 1)),
    CONSTRAINT governed_repositories_allow_gitlinks_check CHECK ((allow_gitlinks = ANY (ARRAY[(0)::bigint, (1)::bigint]))),
    CONSTRAINT governed_repositories_revision_check CHECK ((revision >= 1)),
    CONSTRAINT governed_repositories_scan_max_bytes_check CHECK ((scan_max_bytes >= 1)),
    CONSTRAINT governed_repositories_scan_max_seconds_check CHECK ((scan_max_seconds > (0)::double precision))
);

CREATE TABLE governed_writes (
    idempotency_key text NOT NULL,
    task_id text NOT NULL,
    proposal_id text NOT NULL,
    repository text NOT NULL,
    ref text NOT NULL,
    old_oid text NOT NULL,
    new_oid text NOT NULL,
    generation bigint NOT NULL,
    state text NOT NULL,
    code text,
    observed_oid text,
    changed_files_json text NOT NULL,
    revision bigint NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    CONSTRAINT governed_writes_revision_check CHECK ((revision >= 1)),
    CONSTRAINT governed_writes_state_check CHECK ((state = ANY (ARRAY['INTENDED'::text, 'APPLIED'::text, 'NOT_APPLIED'::text, 'MOVED_BY_OTHER'::text])))
);

CREATE TABLE merkle_leaves (
    leaf_index bigint NOT NULL,
    event_id bigint NOT NULL,
    leaf_hash bytea NOT NULL,
    nodes bytea DEFAULT '\x'::bytea NOT NULL,
    CONSTRAINT merkle_leaves_leaf_hash_check CHECK ((octet_length(leaf_hash) = 32)),
    CONSTRAINT merkle_leaves_leaf_index_check CHECK ((leaf_index >= 0)),
    CONSTRAINT merkle_leaves_nodes_check CHECK (((octet_length(nodes) % 32) = 0))
);

CREATE TABLE merkle_tree (
    only_row integer NOT NULL,
    size bigint,
    frontier bytea NOT NULL,
    revision bigint NOT NULL,
    CONSTRAINT merkle_tree_only_row_check CHECK ((only_row = 1)),
    CONSTRAINT merkle_tree_size_check CHECK ((size >= 0))
);

CREATE TABLE repository_settings_changes (
    idempotency_key text NOT NULL,
    repository text NOT NULL,
    request_sha256 text NOT NULL,
    revision bigint NOT NULL,
    response_json text NOT NULL,
    created_at text NOT NULL,
    CONSTRAINT repository_settings_changes_revision_check CHECK ((revision >= 1))
);

CREATE TABLE run_events (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    payload_json text NOT NULL,
    created_at text NOT NULL,
    CONSTRAINT run_events_seq_check CHECK ((seq >= 1))
);

CREATE TABLE run_events_before_seals (
    run_id text NOT NULL,
    last_seq bigint NOT NULL,
    CONSTRAINT run_events_before_seals_last_seq_check CHECK ((last_seq >= 1))
);

CREATE TABLE runs (
    run_id text NOT NULL,
    session_id text NOT NULL,
    prompt text NOT NULL,
    event_count bigint DEFAULT 0 NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    CONSTRAINT runs_event_count_check CHECK ((event_count >= 0))
);

CREATE TABLE task_idempotency (
    idempotency_key text NOT NULL,
    operation text NOT NULL,
    subject text NOT NULL,
    request_sha256 text NOT NULL,
    response_json text NOT NULL,
    created_at text NOT NULL,
    CONSTRAINT task_idempotency_operation_check CHECK ((operation ~ '^[a-z_]{1,64}$'::text))
);

CREATE TABLE task_initial_execution_projections (
    idempotency_key text NOT NULL,
    task_id text NOT NULL,
    job_id text NOT NULL,
    request_sha256 text NOT NULL,
    execution_digest text NOT NULL,
    response_json text NOT NULL,
    created_at text NOT NULL
);

CREATE TABLE task_proposals (
    proposal_id text NOT NULL,
    task_id text NOT NULL,
    attempt bigint NOT NULL,
    repository text NOT NULL,
    agent_id text,
    base_oid text NOT NULL,
    head_oid text NOT NULL,
    bundle_sha256 text NOT NULL,
    bundle_bytes bigint NOT NULL,
    refs_json text NOT NULL,
    changed_files_json text NOT NULL,
    facts_json text NOT NULL,
    created_at text NOT NULL,
    scan_bytes bigint,
    scan_seconds double precision
);

CREATE SEQUENCE task_seqs
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE task_source_capture_projection_recoveries (
    idempotency_key text NOT NULL,
    task_id text NOT NULL,
    job_id text NOT NULL,
    request_sha256 text NOT NULL,
    execution_digest text NOT NULL,
    response_json text NOT NULL,
    created_at text NOT NULL
);

CREATE TABLE task_spend (
    spend_key text NOT NULL,
    task_id text NOT NULL,
    attempt bigint NOT NULL,
    agent_id text,
    repository text,
    day text NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost_micros bigint NOT NULL,
    cost_currency text,
    over_budget bigint DEFAULT 0 NOT NULL,
    created_at text NOT NULL,
    CONSTRAINT task_spend_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT task_spend_check CHECK (((cost_currency IS NOT NULL) OR (cost_micros = 0))),
    CONSTRAINT task_spend_cost_micros_check CHECK ((cost_micros >= 0)),
    CONSTRAINT task_spend_day_check CHECK ((length(day) = 10)),
    CONSTRAINT task_spend_input_tokens_check CHECK ((input_tokens >= 0)),
    CONSTRAINT task_spend_output_tokens_check CHECK ((output_tokens >= 0)),
    CONSTRAINT task_spend_over_budget_check CHECK ((over_budget = ANY (ARRAY[(0)::bigint, (1)::bigint])))
);

CREATE TABLE tasks (
    task_id text NOT NULL,
    goal text NOT NULL,
    instructions text NOT NULL,
    success_criteria_json text NOT NULL,
    required_capabilities_json text NOT NULL,
    constraints_json text NOT NULL,
    metadata_json text NOT NULL,
    deadline text,
    priority bigint NOT NULL,
    max_attempts bigint NOT NULL,
    attempt bigint DEFAULT 0 NOT NULL,
    status text NOT NULL,
    claimed_by text,
    lease_token_hash text,
    lease_expires_at text,
    result_json text,
    result_digest text,
    result_idempotency_key text,
    verification_json text,
    revision bigint DEFAULT 1 NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    verification_mode text DEFAULT 'reviewer'::text NOT NULL,
    retry_base_seconds bigint DEFAULT 10 NOT NULL,
    retry_max_seconds bigint DEFAULT 3600 NOT NULL,
    not_before text,
    seq bigint,
    awaiting_projection bigint DEFAULT 0 NOT NULL,
    CONSTRAINT tasks_awaiting_projection_check CHECK ((awaiting_projection = ANY (ARRAY[(0)::bigint, (1)::bigint]))),
    CONSTRAINT tasks_retry_base_seconds_check CHECK ((retry_base_seconds >= 1)),
    CONSTRAINT tasks_retry_max_seconds_check CHECK ((retry_max_seconds >= 1)),
    CONSTRAINT tasks_seq_check CHECK ((seq >= 1)),
    CONSTRAINT tasks_verification_mode_check CHECK ((verification_mode = ANY (ARRAY['reviewer'::text, 'auto'::text])))
);

CREATE TABLE writer_leases (
    lease_id text NOT NULL,
    repository text NOT NULL,
    ref text NOT NULL,
    holder text,
    generation bigint NOT NULL,
    revision bigint NOT NULL,
    updated_at text NOT NULL,
    CONSTRAINT writer_leases_generation_check CHECK ((generation >= 0)),
    CONSTRAINT writer_leases_revision_check CHECK ((revision >= 1))
);

ALTER TABLE ONLY checkpoints ALTER COLUMN checkpoint_id SET DEFAULT nextval('checkpoints_checkpoint_id_seq'::regclass);

ALTER TABLE ONLY agent_scan_charges
    ADD CONSTRAINT agent_scan_charges_pkey PRIMARY KEY (charge_id);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (name);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_token_sha256_key UNIQUE (token_sha256);

ALTER TABLE ONLY archived_events
    ADD CONSTRAINT archived_events_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY auxiliary_runs
    ADD CONSTRAINT auxiliary_runs_pkey PRIMARY KEY (aux_id);

ALTER TABLE ONLY checkpoint_cosignatures
    ADD CONSTRAINT checkpoint_cosignatures_pkey PRIMARY KEY (checkpoint_id, witness_name, witness_key_id);

ALTER TABLE ONLY checkpoints
    ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (checkpoint_id);

ALTER TABLE ONLY commit_attestations
    ADD CONSTRAINT commit_attestations_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY event_seal_rows
    ADD CONSTRAINT event_seal_rows_pkey PRIMARY KEY (event_id, "position");

ALTER TABLE ONLY event_seals
    ADD CONSTRAINT event_seals_chain_chain_seq_key UNIQUE (chain, chain_seq);

ALTER TABLE ONLY event_seals
    ADD CONSTRAINT event_seals_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY events
    ADD CONSTRAINT events_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY governed_bindings
    ADD CONSTRAINT governed_bindings_pkey PRIMARY KEY (task_id, job_id);

ALTER TABLE ONLY governed_repositories
    ADD CONSTRAINT governed_repositories_pkey PRIMARY KEY (name);

ALTER TABLE ONLY governed_writes
    ADD CONSTRAINT governed_writes_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY merkle_leaves
    ADD CONSTRAINT merkle_leaves_event_id_key UNIQUE (event_id);

ALTER TABLE ONLY merkle_leaves
    ADD CONSTRAINT merkle_leaves_pkey PRIMARY KEY (leaf_index);

ALTER TABLE ONLY merkle_tree
    ADD CONSTRAINT merkle_tree_pkey PRIMARY KEY (only_row);

ALTER TABLE ONLY repository_settings_changes
    ADD CONSTRAINT repository_settings_changes_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY run_events_before_seals
    ADD CONSTRAINT run_events_before_seals_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY run_events
    ADD CONSTRAINT run_events_pkey PRIMARY KEY (run_id, seq);

ALTER TABLE ONLY runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY task_idempotency
    ADD CONSTRAINT task_idempotency_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY task_initial_execution_projections
    ADD CONSTRAINT task_initial_execution_projections_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY task_initial_execution_projections
    ADD CONSTRAINT task_initial_execution_projections_task_id_key UNIQUE (task_id);

ALTER TABLE ONLY task_proposals
    ADD CONSTRAINT task_proposals_pkey PRIMARY KEY (proposal_id);

ALTER TABLE ONLY task_proposals
    ADD CONSTRAINT task_proposals_task_id_attempt_key UNIQUE (task_id, attempt);

ALTER TABLE ONLY task_source_capture_projection_recoveries
    ADD CONSTRAINT task_source_capture_projection_recoveries_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY task_source_capture_projection_recoveries
    ADD CONSTRAINT task_source_capture_projection_recoveries_task_id_key UNIQUE (task_id);

ALTER TABLE ONLY task_spend
    ADD CONSTRAINT task_spend_pkey PRIMARY KEY (spend_key);

ALTER TABLE ONLY task_spend
    ADD CONSTRAINT task_spend_task_id_attempt_key UNIQUE (task_id, attempt);

ALTER TABLE ONLY tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (task_id);

ALTER TABLE ONLY writer_leases
    ADD CONSTRAINT writer_leases_pkey PRIMARY KEY (lease_id);

ALTER TABLE ONLY writer_leases
    ADD CONSTRAINT writer_leases_repository_ref_key UNIQUE (repository, ref);

CREATE INDEX agent_scan_charges_by_agent ON agent_scan_charges USING btree (repository, agent_id, created_at);

CREATE INDEX archived_events_by_chain ON archived_events USING btree (chain);

CREATE INDEX auxiliary_runs_by_state ON auxiliary_runs USING btree (state, aux_id);

CREATE INDEX auxiliary_runs_by_target ON auxiliary_runs USING btree (session_id, run_id, aux_id);

CREATE INDEX checkpoints_by_size ON checkpoints USING btree (tree_size, checkpoint_id);

CREATE INDEX commit_attestations_by_commit ON commit_attestations USING btree (commit_oid, repository);

CREATE INDEX event_seal_rows_by_row ON event_seal_rows USING btree (row_table, row_key, event_id);

CREATE INDEX event_seals_adopted ON event_seals USING btree (event_id) WHERE (sealed_at_adoption = 1);

CREATE INDEX events_by_task ON events USING btree (task_id, event_id);

CREATE INDEX events_claims_by_agent ON events USING btree (agent_id, task_id) WHERE (event_type = 'TASK_CLAIMED'::text);

CREATE INDEX events_claims_by_task ON events USING btree (task_id, event_id) WHERE (event_type = 'TASK_CLAIMED'::text);

CREATE INDEX governed_writes_by_new_oid ON governed_writes USING btree (new_oid);

CREATE INDEX governed_writes_by_task ON governed_writes USING btree (task_id);

CREATE INDEX runs_by_session ON runs USING btree (session_id, run_id);

CREATE INDEX task_idempotency_by_subject ON task_idempotency USING btree (subject, operation);

CREATE INDEX task_proposals_by_agent ON task_proposals USING btree (repository, agent_id, created_at);

CREATE INDEX task_proposals_by_repository_task ON task_proposals USING btree (repository, task_id);

CREATE INDEX task_spend_by_day ON task_spend USING btree (day);

CREATE INDEX tasks_awaiting_projection ON tasks USING btree (seq) WHERE (awaiting_projection = 1);

CREATE INDEX tasks_by_created ON tasks USING btree (created_at);

CREATE UNIQUE INDEX tasks_by_seq ON tasks USING btree (seq);

CREATE INDEX tasks_by_updated ON tasks USING btree (updated_at);

CREATE INDEX tasks_claim_order ON tasks USING btree (status, priority DESC, seq);

CREATE INDEX tasks_lease_expiry ON tasks USING btree (status, lease_expires_at);

CREATE TRIGGER archived_events_refuse_delete BEFORE DELETE ON archived_events FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be deleted', 'restorable');

CREATE TRIGGER archived_events_refuse_update BEFORE UPDATE ON archived_events FOR EACH ROW EXECUTE FUNCTION refuse_change('archived events cannot be updated');

CREATE TRIGGER event_seal_rows_refuse_delete BEFORE DELETE ON event_seal_rows FOR EACH ROW EXECUTE FUNCTION refuse_change('sealed rows cannot be deleted', 'archivable');

CREATE TRIGGER event_seal_rows_refuse_update BEFORE UPDATE ON event_seal_rows FOR EACH ROW EXECUTE FUNCTION refuse_change('sealed rows cannot be updated');

CREATE TRIGGER event_seals_refuse_delete BEFORE DELETE ON event_seals FOR EACH ROW EXECUTE FUNCTION refuse_change('seals cannot be deleted', 'archivable');

CREATE TRIGGER event_seals_refuse_update BEFORE UPDATE ON event_seals FOR EACH ROW EXECUTE FUNCTION refuse_change('seals cannot be updated');

CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION refuse_change('events cannot be deleted', 'archivable');

CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION refuse_change('events cannot be updated');

CREATE TRIGGER merkle_leaves_refuse_delete BEFORE DELETE ON merkle_leaves FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle leaves cannot be deleted');

CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle leaves cannot be updated');

CREATE TRIGGER run_events_before_seals_refuse_delete BEFORE DELETE ON run_events_before_seals FOR EACH ROW EXECUTE FUNCTION refuse_change('the run events listed before seals cannot change');

CREATE TRIGGER run_events_before_seals_refuse_update BEFORE UPDATE ON run_events_before_seals FOR EACH ROW EXECUTE FUNCTION refuse_change('the run events listed before seals cannot change');

CREATE TRIGGER run_events_refuse_delete BEFORE DELETE ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be deleted', 'run-archivable');

CREATE TRIGGER run_events_refuse_update BEFORE UPDATE ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_change('run events cannot be updated');

CREATE TRIGGER tasks_seq_required BEFORE INSERT OR UPDATE OF seq ON tasks FOR EACH ROW EXECUTE FUNCTION tasks_seq_required();

ALTER TABLE ONLY agent_scan_charges
    ADD CONSTRAINT agent_scan_charges_repository_fkey FOREIGN KEY (repository) REFERENCES governed_repositories(name);

ALTER TABLE ONLY checkpoint_cosignatures
    ADD CONSTRAINT checkpoint_cosignatures_checkpoint_id_fkey FOREIGN KEY (checkpoint_id) REFERENCES checkpoints(checkpoint_id);

ALTER TABLE ONLY commit_attestations
    ADD CONSTRAINT commit_attestations_idempotency_key_fkey FOREIGN KEY (idempotency_key) REFERENCES governed_writes(idempotency_key);

ALTER TABLE ONLY event_seal_rows
    ADD CONSTRAINT event_seal_rows_event_id_fkey FOREIGN KEY (event_id) REFERENCES event_seals(event_id);

ALTER TABLE ONLY event_seals
    ADD CONSTRAINT event_seals_event_id_fkey FOREIGN KEY (event_id) REFERENCES events(event_id);

ALTER TABLE ONLY governed_writes
    ADD CONSTRAINT governed_writes_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES task_proposals(proposal_id);

ALTER TABLE ONLY governed_writes
    ADD CONSTRAINT governed_writes_repository_fkey FOREIGN KEY (repository) REFERENCES governed_repositories(name);

ALTER TABLE ONLY repository_settings_changes
    ADD CONSTRAINT repository_settings_changes_repository_fkey FOREIGN KEY (repository) REFERENCES governed_repositories(name);

ALTER TABLE ONLY run_events_before_seals
    ADD CONSTRAINT run_events_before_seals_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(run_id);

ALTER TABLE ONLY run_events
    ADD CONSTRAINT run_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(run_id);

ALTER TABLE ONLY task_initial_execution_projections
    ADD CONSTRAINT task_initial_execution_projections_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks(task_id);

ALTER TABLE ONLY task_proposals
    ADD CONSTRAINT task_proposals_repository_fkey FOREIGN KEY (repository) REFERENCES governed_repositories(name);

ALTER TABLE ONLY task_source_capture_projection_recoveries
    ADD CONSTRAINT task_source_capture_projection_recoveries_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks(task_id);

ALTER TABLE ONLY task_spend
    ADD CONSTRAINT task_spend_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks(task_id);

ALTER TABLE ONLY writer_leases
    ADD CONSTRAINT writer_leases_repository_fkey FOREIGN KEY (repository) REFERENCES governed_repositories(name);

INSERT INTO merkle_tree(only_row, size, frontier, revision) VALUES (1, NULL, '\x'::bytea, 0);

-- migrate:down
-- Going back drops the ledger: refused once it holds an event, never losing what was acknowledged.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM events) THEN
    RAISE EXCEPTION 'this ledger holds events: going back from its first migration would drop them, and it cannot go back';
  END IF;
END;
$$;
DROP TABLE agent_scan_charges, api_tokens, archived_events, auxiliary_runs, checkpoint_cosignatures, checkpoints, commit_attestations, event_seal_rows, event_seals, events, governed_bindings, governed_repositories, governed_writes, merkle_leaves, merkle_tree, repository_settings_changes, run_events, run_events_before_seals, runs, task_idempotency, task_initial_execution_projections, task_proposals, task_source_capture_projection_recoveries, task_spend, tasks, writer_leases CASCADE;
DROP SEQUENCE IF EXISTS checkpoints_checkpoint_id_seq;
DROP SEQUENCE IF EXISTS event_ids;
DROP SEQUENCE IF EXISTS task_seqs;
DROP FUNCTION capabilities_offered(required_json text, offered_json text);
DROP FUNCTION refuse_change();
DROP FUNCTION tasks_seq_required();
