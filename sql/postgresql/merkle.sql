-- The Merkle log beside the chains: PostgreSQL's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an append moves on, locked until COMMIT: writers beside each other (row-locked
-- transitions) append their leaves one after the other, in the order they then commit, so that
-- leaf indexes are in commit order though event ids are not. A row-locked transition reads it
-- last in its first pipeline batch, after the rows it decides on (so every writer takes its
-- locks in the same order); other writes, once decided, just before their plan.
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1 FOR UPDATE;
