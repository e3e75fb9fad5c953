-- API tokens: looked up by the sha256 of the presented token, which the ledger does not have.

-- name: api_token_get^
-- returns: ApiTokenRow
SELECT {{columns_of_api_tokens}}
FROM api_tokens WHERE name = :name;

-- name: api_token_by_digest^
-- returns: ApiTokenRow
SELECT {{columns_of_api_tokens}}
FROM api_tokens WHERE token_sha256 = :token_sha256;

-- name: api_token_cas_update!
UPDATE api_tokens SET roles_json = :roles_json, capabilities_json = :capabilities_json,
  token_sha256 = :token_sha256, status = :status,
  revision = revision + 1, updated_at = :updated_at
WHERE name = :name AND revision = :expected_revision;
