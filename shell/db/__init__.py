"""The database: connections and transactions, running named statements, migrations and WAL
checkpoints; the only place that talks to apsw and psycopg. Importing the package registers
PostgreSQL's Database (`pg_database`) for the URLs `connection.Database` is opened with."""

from aios_ledger.shell.db import pg_database as pg_database
