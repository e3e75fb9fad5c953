-- Connection set-up and transaction control. PRAGMAs take no parameters, hence one block each.
-- PostgreSQL's own texts of the statements of ../connection.sql: the ones whose SQLite text differs,
-- and PostgreSQL's alone. The rest are written once, in ../connection.sql.

-- name: begin_immediate!
-- One round trip: the transaction, the write lock, and the planner told what SQLite's INDEXED BY
-- tells it: a writer's reads are key lookups and pages of an index in its order (the claim walk,
-- expired leases), never a sort of every queued task. Without it a table whose statistics are
-- behind (just after a bulk create, before autovacuum's ANALYZE) is read whole and sorted for
-- every claim: measured, 9 ms a claim at 20,000 queued against 0.9 at 1,000. And no JIT: a
-- writer's statements are key lookups, and the claim's sort of the few rows it locked, priced
-- past jit_above_cost by enable_sort = off, was compiled for 270 ms a claim (measured).
BEGIN ISOLATION LEVEL READ COMMITTED;
SET LOCAL enable_sort = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL jit = off;
SELECT pg_advisory_xact_lock(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: begin_read!
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: begin_row_locked!
-- As begin_immediate, with the ledger lock shared: beside other row-locked writers, never beside
-- an exclusive one (PostgreSQL queues a new shared request behind a waiting exclusive one).
BEGIN ISOLATION LEVEL READ COMMITTED;
SET LOCAL enable_sort = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL jit = off;
SELECT pg_advisory_xact_lock_shared(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: begin_read_committed!
-- A write's BEGIN as its first pipeline batch sends it (psycopg's pipeline: one statement a text, so
-- begin_immediate and begin_row_locked are sent as this and the writer's settings below, in
-- the same round trip as the write's first reads).
BEGIN ISOLATION LEVEL READ COMMITTED;

-- name: writer_settings_exclusive$
-- begin_immediate's settings and lock, after begin_read_committed (set_config(..., true) is
-- SET LOCAL).
SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('jit', 'off', true),
       pg_advisory_xact_lock(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: writer_settings_shared$
-- begin_row_locked's settings and lock, after begin_read_committed.
SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('jit', 'off', true),
       pg_advisory_xact_lock_shared(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: log_quiesce$
-- Waits until no writer is inside a transaction (the exclusive ledger lock, taken and let go
-- at this transaction's end): a head read after it sees every id handed out so far either
-- committed or gone for good, so a later writer never commits an id below it.
SELECT pg_advisory_xact_lock(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: create_search_path_schema!
-- The schema the search_path names first (its name is checked by the shell: lower-case letters,
-- digits and underscores), for the library's own migrate; dbmate creates it the same way.
-- A role that owns its schema already (and may create nothing else) never asks for more.
DO $$
DECLARE
  wanted text := trim(both '"' from split_part(current_setting('search_path'), ',', 1));
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = wanted) THEN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', wanted);
  END IF;
END;
$$;

-- name: drop_search_path_schema!
-- Only for the scratch schema `schema-dump` migrates to read its DDL back.
DO $$
BEGIN
  EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE',
                 trim(both '"' from split_part(current_setting('search_path'), ',', 1)));
END;
$$;

-- name: notify_work!
-- Work became claimable (`Database.notify("work")`): the channel is the ledger's schema's, so
-- that ledgers sharing a database do not wake each other's long polls (a digest: a channel's
-- name is at most 63 bytes).
SELECT pg_notify('aios_ledger_work_' || md5(current_setting('search_path')), '');

-- name: listen_work!
-- `Database.listen("work")`, on a connection of its own: LISTEN takes a name, not a value.
DO $$
BEGIN
  EXECUTE format('LISTEN %I', 'aios_ledger_work_' || md5(current_setting('search_path')));
END;
$$;
