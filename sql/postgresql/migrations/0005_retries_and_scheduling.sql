-- migrate:up
-- aios-ledger: no-op on this engine. The engines share one numbering (same number, same name);
-- on PostgreSQL, whose first migration came after SQLite's 0001-0008, 0001_initial already
-- creates what SQLite's 0005_retries_and_scheduling adds, so this number records nothing more.
SELECT 1;

-- migrate:down
SELECT 1;
