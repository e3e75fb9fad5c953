-- Governed writes to git: repositories, proposals, writer leases, writes.

-- name: get_governed_repository
-- returns: RepositoryRow
SELECT {{columns_of_governed_repositories}}
FROM governed_repositories WHERE name = :name;

-- name: governed_repository_settings_cas_update!
UPDATE governed_repositories
SET secrets_baseline_json = :secrets_baseline_json,
    secrets_baseline_sha256 = :secrets_baseline_sha256,
    scan_max_bytes = :scan_max_bytes, scan_max_seconds = :scan_max_seconds,
    allow_gitlinks = :allow_gitlinks, agent_scan_max_bytes = :agent_scan_max_bytes,
    agent_scan_max_seconds = :agent_scan_max_seconds,
    agent_scan_window_seconds = :agent_scan_window_seconds,
    pull_request_json = :pull_request_json,
    revision = revision + 1, updated_at = :updated_at
WHERE name = :name AND revision = :expected_revision;

-- name: get_repository_settings_change
SELECT {{columns_of_repository_settings_changes}}
FROM repository_settings_changes WHERE idempotency_key = :idempotency_key;

-- name: agent_scan_spend^
-- What an agent's scans of its proposals to a repository spent since a time.
SELECT count(*) AS scans,
       CAST(coalesce(sum(spent.scan_bytes), 0) AS bigint) AS scan_bytes,
       CAST(coalesce(sum(spent.scan_seconds), 0.0) AS double precision) AS scan_seconds,
       min(spent.created_at) AS oldest_at
FROM (
  SELECT scan_bytes, scan_seconds, created_at FROM task_proposals
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
  UNION ALL
  SELECT scan_bytes, scan_seconds, created_at FROM agent_scan_charges
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
) AS spent;

-- name: scan_charges_of_attempt$
SELECT count(*) FROM agent_scan_charges WHERE task_id = :task_id AND attempt = :attempt;

-- name: get_task_proposal_of_current_attempt
-- returns: ProposalRow
-- The proposal of the task's own attempt, read after the lock in a submit's round trip.
SELECT p.proposal_id, p.task_id, p.attempt, p.repository, p.agent_id, p.base_oid, p.head_oid,
       p.bundle_sha256, p.bundle_bytes, p.refs_json, p.changed_files_json, p.facts_json,
       p.created_at, p.scan_bytes, p.scan_seconds
FROM task_proposals AS p JOIN tasks AS t ON t.task_id = p.task_id AND t.attempt = p.attempt
WHERE p.task_id = :task_id;

-- name: task_proposals_of_task
SELECT {{columns_of_task_proposals}}
FROM task_proposals WHERE task_id = :task_id ORDER BY attempt;

-- name: writer_lease_cas_update!
UPDATE writer_leases
SET holder = :holder, generation = :generation, revision = revision + 1,
    updated_at = :updated_at
WHERE lease_id = :lease_id AND revision = :expected_revision;

-- name: get_writer_lease
-- returns: WriterLeaseRow
SELECT {{columns_of_writer_leases}}
FROM writer_leases WHERE lease_id = :lease_id;

-- name: governed_write_cas_update!
UPDATE governed_writes
SET state = :state, code = :code, observed_oid = :observed_oid, revision = revision + 1,
    updated_at = :updated_at
WHERE idempotency_key = :idempotency_key AND revision = :expected_revision;

-- name: get_governed_write
-- returns: GovernedWriteRow
SELECT {{columns_of_governed_writes}}
FROM governed_writes WHERE idempotency_key = :idempotency_key;

-- name: governed_writes_in_doubt
SELECT {{columns_of_governed_writes}}
FROM governed_writes WHERE state = 'INTENDED' ORDER BY created_at, idempotency_key;
