"""The database: the Database and its transactions (`connection`), running named statements
(`run`), applying plans (`apply`), migrations (`migrator`) and group commit. The engines
(`engines/`, one module each, chosen by the target's URL scheme from `engines.ENGINES`) are the
only place that talks to apsw and psycopg."""
