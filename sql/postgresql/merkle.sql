-- The Merkle log beside the chains: PostgreSQL's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an integration pass moves on, locked until its COMMIT (the integrators' lock
-- already serializes them; a DBA's hand edit waits for it too).
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1 FOR UPDATE;

-- name: merkle_integration_bound^
-- An integration pass's start: one integrator at a time per ledger (its schema) until its
-- transaction ends, writers never waiting on it; how many of the transactions the previous
-- pass saw in progress (comma-separated) still run, the event id sequence's last value, and
-- the transactions in progress at this statement's snapshot (taken before the sequence is
-- read, so that value pairs with the next pass's snapshot: core.log.merkle.ScanFloor).
SELECT (SELECT count(*) FROM unnest(string_to_array(:waiting, ',')) AS w(xid)
        WHERE pg_xact_status(CAST(w.xid AS xid8)) = 'in progress') AS still_running,
       (SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
        FROM event_ids AS s) AS sequence,
       array(SELECT CAST(x AS text) FROM pg_snapshot_xip(pg_current_snapshot()) AS x)
         AS in_progress
FROM (SELECT pg_advisory_xact_lock(
        hashtext('aios_ledger integrate ' || current_setting('search_path')))) AS turn;
