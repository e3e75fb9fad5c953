-- Reading the catalogue: what tables exist, their columns, what migrations were applied.

-- name: record_migration!
INSERT INTO schema_migrations(version) VALUES (:version);
