-- PostgreSQL's texts of ../governed_writes.sql's statements that differ on SQLite, and its own.

-- name: agent_scan_spend^
SELECT count(*) AS scans,
       coalesce(sum(spent.scan_bytes), 0)::bigint AS scan_bytes,
       coalesce(sum(spent.scan_seconds), 0.0)::double precision AS scan_seconds,
       min(spent.created_at) AS oldest_at
FROM (
  SELECT scan_bytes, scan_seconds, created_at FROM task_proposals
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
  UNION ALL
  SELECT scan_bytes, scan_seconds, created_at FROM agent_scan_charges
  WHERE repository = :repository AND agent_id = :agent_id AND created_at >= :since
) AS spent;
