-- migrate:up
-- The Merkle log beside the chains (issue 28, docs/proofs.md): every event is a leaf of one
-- RFC 6962 tree, in commit order, appended in the event's own transaction. Stored as Go's
-- sumdb/tlog stores its hashes: every leaf (with the event it is of), and the hash of every
-- complete subtree above the leaves, so that a root or a proof costs O(log n) reads.
-- merkle_tree is the tree's one head row: its size and its right edge (the hashes of the
-- complete subtrees the size is made of, largest first, concatenated), which is all an append
-- reads. Its size is NULL until the leaves of the events that were there before this
-- migration are built, in event id order (the ledger does it on open, after migrating, or
-- with the first event it appends after a DBA migrated by hand: the hashes are SHA-256, which
-- this engine's SQL cannot compute).
CREATE TABLE merkle_leaves(
  leaf_index INTEGER PRIMARY KEY CHECK (leaf_index >= 0),
  event_id INTEGER NOT NULL UNIQUE,
  leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32)
);

CREATE TABLE merkle_nodes(
  level INTEGER NOT NULL CHECK (level BETWEEN 1 AND 63),
  node_index INTEGER NOT NULL CHECK (node_index >= 0),
  hash BLOB NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (level, node_index)
) WITHOUT ROWID;

CREATE TABLE merkle_tree(
  only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
  size INTEGER CHECK (size >= 0),
  frontier BLOB NOT NULL,
  revision INTEGER NOT NULL
);
INSERT INTO merkle_tree(only_row, size, frontier, revision) VALUES (1, NULL, x'', 0);

-- The tree only grows: an archive keeps the leaves of the events it removes.
CREATE TRIGGER merkle_leaves_refuse_update BEFORE UPDATE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be updated');
END;

CREATE TRIGGER merkle_leaves_refuse_delete BEFORE DELETE ON merkle_leaves
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle leaves cannot be deleted');
END;

CREATE TRIGGER merkle_nodes_refuse_update BEFORE UPDATE ON merkle_nodes
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle nodes cannot be updated');
END;

CREATE TRIGGER merkle_nodes_refuse_delete BEFORE DELETE ON merkle_nodes
BEGIN
  SELECT RAISE(ABORT, 'EVENTS_APPEND_ONLY: Merkle nodes cannot be deleted');
END;

-- migrate:down
DROP TABLE merkle_tree;
DROP TABLE merkle_nodes;
DROP TABLE merkle_leaves;
