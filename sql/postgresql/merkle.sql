-- The Merkle log beside the chains: PostgreSQL's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an append moves on, locked until COMMIT: writers beside each other (row-locked
-- transitions) append their leaves one after the other, in the order they then commit, so that
-- leaf indexes are in commit order though event ids are not. Taken after the plan, as late as
-- the transaction can, so that the lock is held for the append and the COMMIT alone.
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1 FOR UPDATE;
