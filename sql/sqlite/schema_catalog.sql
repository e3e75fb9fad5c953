-- SQLite's texts of ../schema_catalog.sql's statements that differ on PostgreSQL, and its own.

-- name: list_tables
SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name;

-- name: table_columns
SELECT name FROM pragma_table_info(:table_name) ORDER BY cid;

-- name: create_schema_migrations!
-- The exact table dbmate creates, so that dbmate and the library agree on what is applied.
CREATE TABLE IF NOT EXISTS "schema_migrations" (version varchar(128) primary key);

-- name: schema_objects
-- What `schema-dump` prints: every object's DDL, in a stable order.
SELECT type, name, sql FROM sqlite_master
WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, name;
