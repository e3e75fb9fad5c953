-- migrate:up
-- Governed writes to git (issue 19). Every row here is written only by a plan whose sealed event
-- covers it (`core/log/rows.py`): a registered repository, a task attempt's proposal (the
-- bundle's digest and the facts the ledger computed from it), the writer lease of a branch and
-- each governed write with its outcome. Numbered 0010: 0009 belongs to the API server's tokens
-- (issue 18); the migrator applies whatever is pending in version order, gaps included.
CREATE TABLE governed_repositories(
  name TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  head_branch TEXT,
  protected_json TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE task_proposals(
  proposal_id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  agent_id TEXT,
  base_oid TEXT NOT NULL,
  head_oid TEXT NOT NULL,
  bundle_sha256 TEXT NOT NULL,
  bundle_bytes INTEGER NOT NULL,
  refs_json TEXT NOT NULL,
  changed_files_json TEXT NOT NULL,
  facts_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (task_id, attempt)
);

CREATE TABLE writer_leases(
  lease_id TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  ref TEXT NOT NULL,
  holder TEXT,
  generation INTEGER NOT NULL CHECK (generation >= 0),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  updated_at TEXT NOT NULL,
  UNIQUE (repository, ref)
);

CREATE TABLE governed_writes(
  idempotency_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  proposal_id TEXT NOT NULL REFERENCES task_proposals(proposal_id),
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  ref TEXT NOT NULL,
  old_oid TEXT NOT NULL,
  new_oid TEXT NOT NULL,
  generation INTEGER NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('INTENDED', 'APPLIED', 'NOT_APPLIED', 'MOVED_BY_OTHER')),
  code TEXT,
  observed_oid TEXT,
  changed_files_json TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE INDEX governed_writes_by_task ON governed_writes(task_id);

-- migrate:down
DROP INDEX governed_writes_by_task;
DROP TABLE governed_writes;
DROP TABLE writer_leases;
DROP TABLE task_proposals;
DROP TABLE governed_repositories;
