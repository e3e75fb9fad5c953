-- migrate:up
-- Capability grants (issue 26): a token is issued with the capabilities its holder may offer
-- when it claims (a JSON list of names, `[]` for none), sealed with the row like its roles.
-- A token issued before this migration has none recorded (NULL): it keeps claiming as before,
-- with no ceiling, until its name is revoked and issued again (`token list` says so).
-- Numbered 0012 on both engines: 0011 is PostgreSQL's alone (row-locked writers).
ALTER TABLE api_tokens ADD COLUMN capabilities_json TEXT;

-- migrate:down
ALTER TABLE api_tokens DROP COLUMN capabilities_json;
