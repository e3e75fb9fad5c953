-- Signed checkpoints and their cosignatures (shell/proofs/checkpoints.py, docs/checkpoints.md).

-- name: insert_checkpoint!
INSERT INTO checkpoints(origin, tree_size, root_hash, key_id, note, signed_at)
VALUES (:origin, :tree_size, :root_hash, :key_id, :note, :signed_at);

-- name: latest_checkpoint^
-- returns: CheckpointRow
SELECT checkpoint_id, origin, tree_size, root_hash, key_id, note, signed_at
FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1;

-- name: checkpoint_by_body
-- returns: CheckpointRow
-- The stored checkpoints of a size, newest first (the first is served for that size).
SELECT checkpoint_id, origin, tree_size, root_hash, key_id, note, signed_at
FROM checkpoints WHERE tree_size = :tree_size ORDER BY checkpoint_id DESC;

-- name: checkpoint_cosignature_lines
-- A checkpoint's cosignature lines, oldest witness first.
SELECT line FROM checkpoint_cosignatures WHERE checkpoint_id = :checkpoint_id
ORDER BY witness_name, witness_key_id;

-- name: upsert_checkpoint_cosignature!
-- One line per witness key: a witness's later cosignature of the same checkpoint replaces it.
INSERT INTO checkpoint_cosignatures(
  checkpoint_id, witness_name, witness_key_id, cosigned_at, line, received_at
) VALUES (:checkpoint_id, :witness_name, :witness_key_id, :cosigned_at, :line, :received_at)
ON CONFLICT (checkpoint_id, witness_name, witness_key_id) DO UPDATE SET
  cosigned_at = excluded.cosigned_at, line = excluded.line, received_at = excluded.received_at;

-- name: witness_cosigned_size$
-- The largest size up to :tree_size a witness key cosigned: where a push to it resumes.
SELECT max(k.tree_size)
FROM checkpoint_cosignatures AS c JOIN checkpoints AS k ON k.checkpoint_id = c.checkpoint_id
WHERE c.witness_name = :witness_name AND c.witness_key_id = :witness_key_id
  AND k.tree_size <= :tree_size;

-- name: verify_checkpoint_cosignatures
-- `verify` and `upgrade`: every stored cosignature, in verify_checkpoints' order.
SELECT c.checkpoint_id, c.witness_name, c.witness_key_id, c.cosigned_at, c.line
FROM checkpoint_cosignatures AS c JOIN checkpoints AS k ON k.checkpoint_id = c.checkpoint_id
ORDER BY k.tree_size, k.checkpoint_id, c.witness_name, c.witness_key_id;

-- name: verify_checkpoints
-- returns: CheckpointRow
-- `verify` and `upgrade`: every stored checkpoint, as the walk of the leaves reaches them.
SELECT checkpoint_id, origin, tree_size, root_hash, key_id, note, signed_at
FROM checkpoints ORDER BY tree_size, checkpoint_id;
