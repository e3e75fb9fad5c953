-- migrate:up
-- A governed repository's settings in the ledger (issue 26), as SQLite's migration 0013 (the
-- same columns, order, defaults and checks; INTEGER -> bigint, REAL -> double precision,
-- TEXT -> text): the secrets baseline's JSON text and sha256, the scan budget per proposal,
-- gitlinks allowed or not, and each agent's scan budget over a window; what a proposal's scan
-- spent, and what a scan refused over its budget cost its agent; each change of the settings by
-- its idempotency key.
ALTER TABLE governed_repositories ADD COLUMN secrets_baseline_json text;
ALTER TABLE governed_repositories ADD COLUMN secrets_baseline_sha256 text;
ALTER TABLE governed_repositories ADD COLUMN scan_max_bytes bigint NOT NULL DEFAULT 67108864
  CHECK (scan_max_bytes >= 1);
ALTER TABLE governed_repositories ADD COLUMN scan_max_seconds double precision NOT NULL
  DEFAULT 20.0 CHECK (scan_max_seconds > 0);
ALTER TABLE governed_repositories ADD COLUMN allow_gitlinks bigint NOT NULL DEFAULT 0
  CHECK (allow_gitlinks IN (0, 1));
ALTER TABLE governed_repositories ADD COLUMN agent_scan_max_bytes bigint NOT NULL
  DEFAULT 1073741824 CHECK (agent_scan_max_bytes >= 1);
ALTER TABLE governed_repositories ADD COLUMN agent_scan_max_seconds double precision NOT NULL
  DEFAULT 600.0 CHECK (agent_scan_max_seconds > 0);
ALTER TABLE governed_repositories ADD COLUMN agent_scan_window_seconds bigint NOT NULL
  DEFAULT 3600 CHECK (agent_scan_window_seconds >= 1);

ALTER TABLE task_proposals ADD COLUMN scan_bytes bigint;
ALTER TABLE task_proposals ADD COLUMN scan_seconds double precision;
CREATE INDEX task_proposals_by_agent ON task_proposals(repository, agent_id, created_at);

CREATE TABLE repository_settings_changes(
  idempotency_key text PRIMARY KEY,
  repository text NOT NULL REFERENCES governed_repositories(name),
  request_sha256 text NOT NULL,
  revision bigint NOT NULL CHECK (revision >= 1),
  response_json text NOT NULL,
  created_at text NOT NULL
);

-- A scan refused over its budget records no proposal, but what it cost is charged to its agent:
-- the window counts these beside the proposals.
CREATE TABLE agent_scan_charges(
  charge_id text PRIMARY KEY,
  repository text NOT NULL REFERENCES governed_repositories(name),
  agent_id text NOT NULL,
  task_id text NOT NULL,
  attempt bigint NOT NULL,
  bundle_sha256 text NOT NULL,
  code text NOT NULL,
  scan_bytes bigint NOT NULL CHECK (scan_bytes >= 0),
  scan_seconds double precision NOT NULL CHECK (scan_seconds >= 0),
  created_at text NOT NULL
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
