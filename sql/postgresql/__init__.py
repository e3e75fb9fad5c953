"""PostgreSQL's texts of the named statements (the same names as SQLite's in `aios_ledger.sql`),
and its dbmate-compatible migrations (`migrations/`)."""
