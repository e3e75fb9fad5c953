-- migrate:up
-- Signed checkpoints, as SQLite's 0018 (docs/checkpoints.md): each checkpoint the ledger
-- signed, as the note it served, with its tree head and its key's name and ID; and the
-- witnesses' cosignatures of each, one line per witness key. Not events: an event per
-- checkpoint would grow the tree it signs; each row carries its own signature.
CREATE TABLE checkpoints(
  checkpoint_id bigserial PRIMARY KEY,
  origin text NOT NULL CHECK (length(origin) BETWEEN 1 AND 255),
  tree_size bigint NOT NULL CHECK (tree_size >= 0),
  root_hash bytea NOT NULL CHECK (octet_length(root_hash) = 32),
  key_id text NOT NULL CHECK (length(key_id) = 8),
  note text NOT NULL,
  signed_at text NOT NULL
);
CREATE INDEX checkpoints_by_size ON checkpoints(tree_size, checkpoint_id);

CREATE TABLE checkpoint_cosignatures(
  checkpoint_id bigint NOT NULL REFERENCES checkpoints(checkpoint_id),
  witness_name text NOT NULL CHECK (length(witness_name) BETWEEN 1 AND 255),
  witness_key_id text NOT NULL CHECK (length(witness_key_id) = 8),
  cosigned_at bigint NOT NULL CHECK (cosigned_at >= 0),
  line text NOT NULL,
  received_at text NOT NULL,
  PRIMARY KEY (checkpoint_id, witness_name, witness_key_id)
);

-- migrate:down
DROP TABLE checkpoint_cosignatures;
DROP TABLE checkpoints;
