-- migrate:up
-- Governed writes to git (issue 19), as SQLite's migration 0010 (same columns, order and
-- checks; INTEGER -> bigint, TEXT -> text). Every row here is written only by a plan whose
-- sealed event covers it: a registered repository, a task attempt's proposal, the writer lease
-- of a branch and each governed write with its outcome.
CREATE TABLE governed_repositories(
  name text PRIMARY KEY,
  path text NOT NULL,
  head_branch text,
  protected_json text NOT NULL,
  revision bigint NOT NULL CHECK (revision >= 1),
  created_at text NOT NULL,
  updated_at text NOT NULL
);

CREATE TABLE task_proposals(
  proposal_id text PRIMARY KEY,
  task_id text NOT NULL,
  attempt bigint NOT NULL,
  repository text NOT NULL REFERENCES governed_repositories(name),
  agent_id text,
  base_oid text NOT NULL,
  head_oid text NOT NULL,
  bundle_sha256 text NOT NULL,
  bundle_bytes bigint NOT NULL,
  refs_json text NOT NULL,
  changed_files_json text NOT NULL,
  facts_json text NOT NULL,
  created_at text NOT NULL,
  UNIQUE (task_id, attempt)
);

CREATE TABLE writer_leases(
  lease_id text PRIMARY KEY,
  repository text NOT NULL REFERENCES governed_repositories(name),
  ref text NOT NULL,
  holder text,
  generation bigint NOT NULL CHECK (generation >= 0),
  revision bigint NOT NULL CHECK (revision >= 1),
  updated_at text NOT NULL,
  UNIQUE (repository, ref)
);

CREATE TABLE governed_writes(
  idempotency_key text PRIMARY KEY,
  task_id text NOT NULL,
  proposal_id text NOT NULL REFERENCES task_proposals(proposal_id),
  repository text NOT NULL REFERENCES governed_repositories(name),
  ref text NOT NULL,
  old_oid text NOT NULL,
  new_oid text NOT NULL,
  generation bigint NOT NULL,
  state text NOT NULL
    CHECK (state IN ('INTENDED', 'APPLIED', 'NOT_APPLIED', 'MOVED_BY_OTHER')),
  code text,
  observed_oid text,
  changed_files_json text NOT NULL,
  revision bigint NOT NULL CHECK (revision >= 1),
  created_at text NOT NULL,
  updated_at text NOT NULL
);

CREATE INDEX governed_writes_by_task ON governed_writes(task_id);

-- migrate:down
DROP INDEX governed_writes_by_task;
DROP TABLE governed_writes;
DROP TABLE writer_leases;
DROP TABLE task_proposals;
DROP TABLE governed_repositories;
