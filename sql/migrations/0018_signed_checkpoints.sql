-- migrate:up
-- Signed checkpoints (issue 28, docs/checkpoints.md): each C2SP tlog-checkpoint the ledger
-- signed, as the signed note it served (text), with the tree head it signs (size, root) and
-- the key that signed it (name and key ID, never the key itself), so that an old checkpoint
-- can still be served and a proof can name it; and the witnesses' cosignatures of each, one
-- signature line per witness key (a newer one replaces the older). They are not events: an
-- event per checkpoint would grow the tree it signs, and each row carries its own proof, a
-- signature a reader checks with the public key alone.
CREATE TABLE checkpoints(
  checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
  origin TEXT NOT NULL CHECK (length(origin) BETWEEN 1 AND 255),
  tree_size INTEGER NOT NULL CHECK (tree_size >= 0),
  root_hash BLOB NOT NULL CHECK (length(root_hash) = 32),
  key_id TEXT NOT NULL CHECK (length(key_id) = 8),
  note TEXT NOT NULL,
  signed_at TEXT NOT NULL
);
CREATE INDEX checkpoints_by_size ON checkpoints(tree_size, checkpoint_id);

CREATE TABLE checkpoint_cosignatures(
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(checkpoint_id),
  witness_name TEXT NOT NULL CHECK (length(witness_name) BETWEEN 1 AND 255),
  witness_key_id TEXT NOT NULL CHECK (length(witness_key_id) = 8),
  cosigned_at INTEGER NOT NULL CHECK (cosigned_at >= 0),
  line TEXT NOT NULL,
  received_at TEXT NOT NULL,
  PRIMARY KEY (checkpoint_id, witness_name, witness_key_id)
);

-- migrate:down
DROP TABLE checkpoint_cosignatures;
DROP TABLE checkpoints;
