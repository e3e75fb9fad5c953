-- The per-table shapes SQLite spells its own way (`sql/table_shapes.sql`).

-- shape: sealed_history
-- A truth value selected as 0 or 1.
{{history}}

-- shape: no_sealed_history
NULL

-- shape: key_in_bytes_order
-- Text compares byte by byte in SQLite's default collation.
stored.{{column}}
