-- PostgreSQL's texts of ../schema_catalog.sql's statements that differ on SQLite, and its own.

-- name: list_tables
SELECT table_name::text AS name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
ORDER BY table_name;

-- name: table_columns
SELECT column_name::text AS name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = :table_name
ORDER BY ordinal_position;

-- name: create_schema_migrations!
-- The exact table dbmate creates, so that dbmate and the library agree on what is applied.
CREATE TABLE IF NOT EXISTS schema_migrations (version varchar(128) PRIMARY KEY);

