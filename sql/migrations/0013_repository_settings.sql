-- migrate:up
-- A governed repository's settings in the ledger (issue 26), sealed with its row: the secret
-- scanner's baseline (the detect-secrets baseline's JSON text and its sha256), the scan budget
-- per proposal, whether proposals may carry gitlinks, and each agent's scan budget over a
-- window (bytes and seconds per agent per repository). Before, they were the bare
-- repository's own git config (`aios-ledger.*`), which the ledger no longer reads. A row
-- registered before takes the defaults, which its seal (taken without these columns) still
-- proves while they hold them. A proposal records what its scan spent (NULL before), which
-- its agent's window counts, and so does a scan refused over its budget (charged to its agent);
-- each change of the settings is kept by its idempotency key.
-- Numbered 0013 on both engines (0014 is the sealed run events').
ALTER TABLE governed_repositories ADD COLUMN secrets_baseline_json TEXT;
ALTER TABLE governed_repositories ADD COLUMN secrets_baseline_sha256 TEXT;
ALTER TABLE governed_repositories ADD COLUMN scan_max_bytes INTEGER NOT NULL DEFAULT 67108864
  CHECK (scan_max_bytes >= 1);
ALTER TABLE governed_repositories ADD COLUMN scan_max_seconds REAL NOT NULL DEFAULT 20.0
  CHECK (scan_max_seconds > 0);
ALTER TABLE governed_repositories ADD COLUMN allow_gitlinks INTEGER NOT NULL DEFAULT 0
  CHECK (allow_gitlinks IN (0, 1));
ALTER TABLE governed_repositories ADD COLUMN agent_scan_max_bytes INTEGER NOT NULL
  DEFAULT 1073741824 CHECK (agent_scan_max_bytes >= 1);
ALTER TABLE governed_repositories ADD COLUMN agent_scan_max_seconds REAL NOT NULL DEFAULT 600.0
  CHECK (agent_scan_max_seconds > 0);
ALTER TABLE governed_repositories ADD COLUMN agent_scan_window_seconds INTEGER NOT NULL
  DEFAULT 3600 CHECK (agent_scan_window_seconds >= 1);

ALTER TABLE task_proposals ADD COLUMN scan_bytes INTEGER;
ALTER TABLE task_proposals ADD COLUMN scan_seconds REAL;
CREATE INDEX task_proposals_by_agent ON task_proposals(repository, agent_id, created_at);

CREATE TABLE repository_settings_changes(
  idempotency_key TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  request_sha256 TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);

-- A scan refused over its budget records no proposal, but what it cost is charged to its agent:
-- the window counts these beside the proposals.
CREATE TABLE agent_scan_charges(
  charge_id TEXT PRIMARY KEY,
  repository TEXT NOT NULL REFERENCES governed_repositories(name),
  agent_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  bundle_sha256 TEXT NOT NULL,
  code TEXT NOT NULL,
  scan_bytes INTEGER NOT NULL CHECK (scan_bytes >= 0),
  scan_seconds REAL NOT NULL CHECK (scan_seconds >= 0),
  created_at TEXT NOT NULL
);
CREATE INDEX agent_scan_charges_by_agent ON agent_scan_charges(repository, agent_id, created_at);

-- migrate:down
DROP INDEX agent_scan_charges_by_agent;
DROP TABLE agent_scan_charges;
DROP TABLE repository_settings_changes;
DROP INDEX task_proposals_by_agent;
ALTER TABLE task_proposals DROP COLUMN scan_seconds;
ALTER TABLE task_proposals DROP COLUMN scan_bytes;
ALTER TABLE governed_repositories DROP COLUMN agent_scan_window_seconds;
ALTER TABLE governed_repositories DROP COLUMN agent_scan_max_seconds;
ALTER TABLE governed_repositories DROP COLUMN agent_scan_max_bytes;
ALTER TABLE governed_repositories DROP COLUMN allow_gitlinks;
ALTER TABLE governed_repositories DROP COLUMN scan_max_seconds;
ALTER TABLE governed_repositories DROP COLUMN scan_max_bytes;
ALTER TABLE governed_repositories DROP COLUMN secrets_baseline_sha256;
ALTER TABLE governed_repositories DROP COLUMN secrets_baseline_json;
