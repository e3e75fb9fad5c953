-- The Merkle log beside the chains: PostgreSQL's own texts of the statements of ../merkle.sql.

-- name: merkle_tree_for_update^
-- returns: MerkleTreeRow
-- The head row an append moves on, locked until COMMIT: writers beside each other (row-locked
-- transitions) append their leaves one after the other, in the order they then commit, so that
-- leaf indexes are in commit order though event ids are not. A row-locked transition reads it
-- last in its first flight, after the rows it decides on (so every writer takes its locks in
-- the same order); other writes, once decided, just before their plan.
SELECT size, frontier, revision FROM merkle_tree WHERE only_row = 1 FOR UPDATE;

-- name: merkle_tree_cas_update_checked$
-- merkle_tree_cas_update (its text, verbatim, inside) failing unless it changed exactly one
-- row, as tasks_cas_update_checked does: the plan that carries the leaves carries its COMMIT.
WITH changed AS (
UPDATE merkle_tree SET size = :size, frontier = :frontier, revision = revision + 1
WHERE only_row = :only_row AND revision = :expected_revision
RETURNING 1)
SELECT CAST(CASE count(*) WHEN 1 THEN '1' ELSE 'REVISION_CONFLICT' END AS integer) FROM changed;
