-- migrate:up
-- aios-ledger: no-op on this engine. The engines share one numbering (same number, same name);
-- PostgreSQL's 0011 lets writers of different tasks run under row locks, with seals (v3) that
-- do not cover the global event id. SQLite has one writer at a time and keeps dense ids and
-- its v2 seals, so it has nothing to change here.
SELECT 1;

-- migrate:down
SELECT 1;
