-- PostgreSQL's texts of ../connection.sql's statements that differ on SQLite, and its own.

-- name: begin_read!
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: begin_read_committed!
-- A write's BEGIN in a pipeline, which takes one statement a text: the writer's settings follow
-- it in the same round trip (SQLite's begin_immediate is these two on PostgreSQL).
BEGIN ISOLATION LEVEL READ COMMITTED;

-- name: writer_settings_exclusive$
-- An exclusive writer's settings and lock: the planner told what SQLite's INDEXED BY tells it,
-- and no JIT (lookups priced high by enable_sort = off would be compiled each time). The
-- transaction id is taken before any event id is drawn, so an integrator's snapshot names it.
SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('jit', 'off', true),
       pg_advisory_xact_lock(hashtext('aios_ledger write ' || current_setting('search_path'))),
       pg_current_xact_id();

-- name: writer_settings_shared$
-- writer_settings_exclusive with the ledger lock shared: a row-locked writer runs beside other
-- row-locked writers, never beside an exclusive one.
SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('jit', 'off', true),
       pg_advisory_xact_lock_shared(hashtext('aios_ledger write ' || current_setting('search_path'))),
       pg_current_xact_id();

-- name: create_search_path_schema!
-- The schema the search_path names first (its name checked by the shell), as dbmate creates
-- it; a role that owns its schema already never asks for more.
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

-- name: notify!
-- `Database.notify(channel)`; the name ends in a digest of the ledger's schema, so that ledgers
-- sharing a database do not wake each other's long polls and event streams.
SELECT pg_notify('aios_ledger_' || :channel || '_' || md5(current_setting('search_path')), '');

-- name: listen_work!
-- `Database.listen("work")`, on a connection of its own: LISTEN takes a name, not a value.
DO $$
BEGIN
  EXECUTE format('LISTEN %I', 'aios_ledger_work_' || md5(current_setting('search_path')));
END;
$$;

-- name: listen_events!
-- `Database.listen("events")`, as listen_work.
DO $$
BEGIN
  EXECUTE format('LISTEN %I', 'aios_ledger_events_' || md5(current_setting('search_path')));
END;
$$;

-- name: checkpoint_signer_lock$
-- One checkpoint signer at a time per ledger, across processes; writers never wait on it.
SELECT pg_advisory_xact_lock(hashtext('aios_ledger checkpoint ' || current_setting('search_path')));
