"""The database: connections and transactions, running named statements, migrations and WAL
checkpoints; the only place that talks to apsw."""
