-- migrate:up
-- The Merkle log's subtrees move into the rows of the leaves that complete them, as SQLite's
-- 0024 (docs/proofs.md): the subtree at (level, index) is stored once, in the row of its last
-- leaf, (index + 1) * 2**level - 1, at its level's place in `nodes` (the hashes of the
-- subtrees the leaf completes, level 1 upwards, concatenated). An append writes one row per
-- leaf; a proof reads one row per stored hash it names. The hashes are moved, not recomputed.
ALTER TABLE merkle_leaves
  ADD COLUMN nodes bytea NOT NULL DEFAULT '\x'::bytea CHECK (octet_length(nodes) % 32 = 0);

DROP TRIGGER merkle_leaves_refuse_update ON merkle_leaves;
UPDATE merkle_leaves AS l SET nodes = completed.nodes
FROM (
  SELECT ((node_index + 1) << level) - 1 AS leaf_index,
    string_agg(hash, '\x'::bytea ORDER BY level) AS nodes
  FROM merkle_nodes
  GROUP BY 1
) AS completed
WHERE l.leaf_index = completed.leaf_index;
CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle leaves cannot be updated');

DROP TABLE merkle_nodes;

-- migrate:down
CREATE TABLE merkle_nodes(
  level integer NOT NULL CHECK (level BETWEEN 1 AND 63),
  node_index bigint NOT NULL CHECK (node_index >= 0),
  hash bytea NOT NULL CHECK (octet_length(hash) = 32),
  PRIMARY KEY (level, node_index)
);

INSERT INTO merkle_nodes(level, node_index, hash)
SELECT levels.level, ((l.leaf_index + 1) >> levels.level) - 1,
  substring(l.nodes FROM 32 * levels.level - 31 FOR 32)
FROM merkle_leaves AS l CROSS JOIN generate_series(1, 63) AS levels(level)
WHERE 32 * levels.level <= octet_length(l.nodes);

CREATE TRIGGER merkle_nodes_refuse_update BEFORE UPDATE ON merkle_nodes
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle nodes cannot be updated');
CREATE TRIGGER merkle_nodes_refuse_delete BEFORE DELETE ON merkle_nodes
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle nodes cannot be deleted');

ALTER TABLE merkle_leaves DROP COLUMN nodes;
