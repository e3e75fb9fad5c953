-- Transactions on PostgreSQL. Writers run at READ COMMITTED and take the ledger's write lock
-- first (one transaction-scoped advisory lock per schema, keyed by the search_path): the
-- counterpart of SQLite's BEGIN IMMEDIATE, under which every decision reads the rows it decides
-- on and the log's tail unchanged until it commits. Readers take one REPEATABLE READ snapshot.

-- name: begin_immediate!
-- One round trip: the transaction, the write lock, and the planner told what SQLite's INDEXED BY
-- tells it: a writer's reads are key lookups and pages of an index in its order (the claim walk,
-- expired leases), never a sort of every queued task. Without it a table whose statistics are
-- behind (just after a bulk create, before autovacuum's ANALYZE) is read whole and sorted for
-- every claim: measured, 9 ms a claim at 20,000 queued against 0.9 at 1,000.
BEGIN ISOLATION LEVEL READ COMMITTED;
SET LOCAL enable_sort = off;
SET LOCAL enable_bitmapscan = off;
SELECT pg_advisory_xact_lock(hashtext('aios_ledger write ' || current_setting('search_path')));

-- name: begin_read!
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: commit!
COMMIT;

-- name: rollback!
ROLLBACK;

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
