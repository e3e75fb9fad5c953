-- migrate:up
-- Capability grants (issue 26), as SQLite's migration 0012: the capabilities a token's holder
-- may offer when it claims (a JSON list of names), NULL for a token issued before it (no
-- ceiling, until the name is revoked and issued again).
ALTER TABLE api_tokens ADD COLUMN capabilities_json text;

-- migrate:down
ALTER TABLE api_tokens DROP COLUMN capabilities_json;
