"""PostgreSQL migrations `NNNN_description.sql` (`-- migrate:up` / `-- migrate:down`, dbmate).

0001 is SQLite's 0001 to 0008 in one step (PostgreSQL had no ledgers before them); a later
SQLite migration gets its PostgreSQL port here under the same number, one file each."""
