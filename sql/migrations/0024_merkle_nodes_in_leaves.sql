-- migrate:up
-- The Merkle log's subtrees move into the rows of the leaves that complete them (issue 28,
-- docs/proofs.md): the hash of the complete subtree at (level, index) is stored, once, in the
-- row of its last leaf, (index + 1) * 2**level - 1, at its level's place in that row's `nodes`
-- (the hashes of the subtrees the leaf completes, level 1 upwards, concatenated: empty for an
-- even leaf). An append then writes one row per leaf instead of a leaf row and about one
-- subtree row, and a proof still reads one row per stored hash it names (O(log n)). The
-- hashes are moved, never recomputed: a tree converted here has the roots and proofs it had,
-- and `verify` holds it to the seals as before. Numbered 0024 on both engines.
ALTER TABLE merkle_leaves
  ADD COLUMN nodes BLOB NOT NULL DEFAULT x'' CHECK (length(nodes) % 32 = 0);

DROP TRIGGER merkle_leaves_refuse_update;
-- A leaf completes the subtrees of levels 1 up to the trailing zeros of its index + 1, so its
-- row's `nodes` is built level by level, each step reading one stored subtree by its key. In
-- SQL SQLite 3.40 runs (the stdlib's, for DBAs and the older runtime): no unhex, no ORDER BY
-- inside an aggregate; `||` of two blobs is their bytes, cast back to a blob; a bare column
-- beside max() is the one of the row holding the max.
UPDATE merkle_leaves SET nodes = completed.nodes
FROM (
  WITH RECURSIVE built(leaf_index, level, nodes) AS (
    SELECT 2 * node_index + 1, 1, hash FROM merkle_nodes WHERE level = 1
    UNION ALL
    SELECT built.leaf_index, built.level + 1, CAST(built.nodes || n.hash AS BLOB)
    FROM built JOIN merkle_nodes AS n
      ON n.level = built.level + 1
      AND n.node_index = ((built.leaf_index + 1) >> (built.level + 1)) - 1
      AND ((n.node_index + 1) << n.level) - 1 = built.leaf_index
  )
  SELECT leaf_index, max(level) AS level, nodes FROM built GROUP BY leaf_index
) AS completed
WHERE merkle_leaves.leaf_index = completed.leaf_index;
CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be updated');
END;

DROP TABLE merkle_nodes;

-- migrate:down
CREATE TABLE merkle_nodes(
  level INTEGER NOT NULL CHECK (level BETWEEN 1 AND 63),
  node_index INTEGER NOT NULL CHECK (node_index >= 0),
  hash BLOB NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (level, node_index)
) WITHOUT ROWID;

WITH RECURSIVE levels(level) AS (
  SELECT 1 UNION ALL SELECT level + 1 FROM levels WHERE level < 63
)
INSERT INTO merkle_nodes(level, node_index, hash)
SELECT levels.level, ((l.leaf_index + 1) >> levels.level) - 1,
  substr(l.nodes, 32 * levels.level - 31, 32)
FROM merkle_leaves AS l JOIN levels ON 32 * levels.level <= length(l.nodes);

CREATE TRIGGER merkle_nodes_refuse_update BEFORE UPDATE ON merkle_nodes
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle nodes cannot be updated');
END;

CREATE TRIGGER merkle_nodes_refuse_delete BEFORE DELETE ON merkle_nodes
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle nodes cannot be deleted');
END;

ALTER TABLE merkle_leaves DROP COLUMN nodes;
