-- The attestations of landed governed writes.

-- name: get_commit_attestation
-- returns: CommitAttestationRow
SELECT {{columns_of_commit_attestations}}
FROM commit_attestations WHERE idempotency_key = :idempotency_key;

-- name: governed_writes_of_commit
-- returns: GovernedWriteRow
-- The landed writes that moved a branch to a commit, optionally of one repository.
SELECT {{columns_of_governed_writes}}
FROM governed_writes
WHERE new_oid = :commit_oid AND state = 'APPLIED'
  AND (CAST(:repository AS TEXT) IS NULL OR repository = :repository)
ORDER BY created_at, idempotency_key;
