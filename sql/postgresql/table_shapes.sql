-- The per-table shapes PostgreSQL spells its own way (`sql/table_shapes.sql`).

-- shape: sealed_history
-- EXISTS is a boolean: selected as 0 or 1, as SQLite's is.
{{history}}::int

-- shape: no_sealed_history
-- A NULL selected where other tables select a number.
NULL::bigint

-- shape: key_in_bytes_order
-- Text compared byte by byte, whatever the database's collation.
stored.{{column}} COLLATE "C"
