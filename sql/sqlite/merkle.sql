-- The Merkle log beside the chains: SQLite's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an append moves on; SQLite's one writer holds the write lock already.
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1;
