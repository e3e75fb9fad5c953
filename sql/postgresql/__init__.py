"""PostgreSQL's texts of the named statements (the same names as SQLite's in `aios_ledger.sql`),
its dbmate-compatible migrations (`migrations/`) and its generated `schema.sql`."""
