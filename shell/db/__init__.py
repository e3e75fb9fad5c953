"""The database: the Database and its transactions (`connection`), running named statements
(`run`), applying plans (`apply`) with the log's tail they seal onto (`tail`) and the Merkle
tree's leaves they append (`merkle`, which also reads tree heads and proofs), migrations
(`migrator`, sealing an adopted log's events: `adoption`) and group commit. The engines
(`engines/`, one module each, chosen by the target's URL scheme from `engines.ENGINES`) are the
only place that talks to apsw and psycopg."""
