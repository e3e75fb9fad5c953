-- migrate:up
-- API tokens (issue 18), as SQLite's migration 0009 (same columns, order and checks; INTEGER ->
-- bigint, TEXT -> text, so a row digests alike on both engines and copies across unchanged).
-- Only a token's sha256 is kept. A state table: every row is written by a plan whose sealed
-- ledger-level event (API_TOKEN_ISSUED, API_TOKEN_REVOKED) covers the row's digest.
CREATE TABLE api_tokens(
  name text PRIMARY KEY,
  roles_json text NOT NULL,
  token_sha256 text NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
  status text NOT NULL CHECK (status IN ('ACTIVE', 'REVOKED')),
  revision bigint NOT NULL CHECK (revision >= 1),
  created_at text NOT NULL,
  updated_at text NOT NULL
);

-- migrate:down
DROP TABLE api_tokens;
