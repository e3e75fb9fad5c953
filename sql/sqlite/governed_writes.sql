-- Governed writes to git (0.x migration 0010): repositories, proposals, writer leases, writes.
-- SQLite's own texts of the statements of ../governed_writes.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../governed_writes.sql.

-- name: agent_scan_spend^
SELECT count(*) AS scans,
       coalesce(sum(spent.scan_bytes), 0) AS scan_bytes,
       total(spent.scan_seconds) AS scan_seconds,
       min(spent.created_at) AS oldest_at
FROM (
  SELECT scan_bytes, scan_seconds, created_at FROM task_proposals
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
  UNION ALL
  SELECT scan_bytes, scan_seconds, created_at FROM agent_scan_charges
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
) AS spent;
