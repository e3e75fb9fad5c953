"""SQLite's own statement texts (the shared ones are in `aios_ledger.sql`)."""
