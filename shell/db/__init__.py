"""Connections, transactions, named statements and migrations: the only place that talks to apsw."""
