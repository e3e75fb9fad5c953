-- Reading the catalogue: what tables exist, their columns, what migrations were applied.

-- name: record_migration!
INSERT INTO schema_migrations(version) VALUES (:version);

-- name: forget_migrations!
-- `upgrade`: the 0.x history goes, and the baseline is recorded in its place.
DELETE FROM schema_migrations;

-- name: applied_migrations
SELECT CAST(version AS text) AS version FROM schema_migrations ORDER BY version;
