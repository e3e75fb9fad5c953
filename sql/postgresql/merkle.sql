-- The Merkle log beside the chains: PostgreSQL's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an append moves on, locked until COMMIT so leaf indexes follow commit order.
-- Writers take it after the rows they decide on, so all take their locks in the same order.
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1 FOR UPDATE;
