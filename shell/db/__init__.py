"""The database: transactions, named statements, plans, the Merkle tree and migrations. The
engines (`engines/`) are the only place that talks to apsw and psycopg."""
