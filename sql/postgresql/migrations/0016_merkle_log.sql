-- migrate:up
-- The Merkle log beside the chains, as SQLite's 0016 (docs/proofs.md): every leaf with the
-- event it is of, the hash of every complete subtree above the leaves, and the tree's one head
-- row (its size and right edge). Event ids come from a sequence and are not in commit order;
-- leaf indexes are: a writer appends its events' leaves while it holds the head row locked
-- (`merkle_tree_for_update`), which it takes as late as it can, once its decision is made and
-- just before its plan is sent, so that the leaves of two transactions are in the order they
-- commit and the lock is held for no more than the plan's round trip and the COMMIT. The size
-- is NULL until the ledger built the leaves of the events that were there before this
-- migration (on open, or with its first append).
CREATE TABLE merkle_leaves(
  leaf_index bigint PRIMARY KEY CHECK (leaf_index >= 0),
  event_id bigint NOT NULL UNIQUE,
  leaf_hash bytea NOT NULL CHECK (octet_length(leaf_hash) = 32)
);

CREATE TABLE merkle_nodes(
  level integer NOT NULL CHECK (level BETWEEN 1 AND 63),
  node_index bigint NOT NULL CHECK (node_index >= 0),
  hash bytea NOT NULL CHECK (octet_length(hash) = 32),
  PRIMARY KEY (level, node_index)
);

CREATE TABLE merkle_tree(
  only_row integer PRIMARY KEY CHECK (only_row = 1),
  size bigint CHECK (size >= 0),
  frontier bytea NOT NULL,
  revision bigint NOT NULL
);
INSERT INTO merkle_tree(only_row, size, frontier, revision) VALUES (1, NULL, '\x'::bytea, 0);

-- The tree only grows: an archive keeps the leaves of the events it removes.
CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle leaves cannot be updated');
CREATE TRIGGER merkle_leaves_refuse_delete BEFORE DELETE ON merkle_leaves
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle leaves cannot be deleted');
CREATE TRIGGER merkle_nodes_refuse_update BEFORE UPDATE ON merkle_nodes
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle nodes cannot be updated');
CREATE TRIGGER merkle_nodes_refuse_delete BEFORE DELETE ON merkle_nodes
  FOR EACH ROW EXECUTE FUNCTION refuse_change('Merkle nodes cannot be deleted');

-- migrate:down
DROP TABLE merkle_tree;
DROP TABLE merkle_nodes;
DROP TABLE merkle_leaves;
