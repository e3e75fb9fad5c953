-- migrate:up
-- API tokens (issue 18): who may speak to the ledger over HTTP (`aios-ledger serve`), and in
-- which roles. Only a token's sha256 is kept; the token itself is shown once, when issued.
-- A state table: every row is written by a plan whose sealed ledger-level event
-- (API_TOKEN_ISSUED, API_TOKEN_REVOKED) covers the row's digest, so `verify` holds it.
CREATE TABLE api_tokens(
  name TEXT PRIMARY KEY,
  roles_json TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
  status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'REVOKED')),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- migrate:down
DROP TABLE api_tokens;
