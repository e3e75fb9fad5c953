-- Connection set-up and transaction control. PRAGMAs take no parameters, hence one block each.
-- SQLite's own texts of the statements of ../connection.sql: the ones whose PostgreSQL text differs,
-- and SQLite's alone. The rest are written once, in ../connection.sql.

-- name: pragma_journal_wal$
PRAGMA journal_mode = WAL;

-- name: pragma_foreign_keys_on!
PRAGMA foreign_keys = ON;

-- name: pragma_synchronous_full!
PRAGMA synchronous = FULL;

-- name: pragma_synchronous_normal!
PRAGMA synchronous = NORMAL;

-- name: pragma_integrity_check$
PRAGMA integrity_check;

-- name: begin_immediate!
-- Writers take the write lock up front: a deferred transaction that upgrades can fail with
-- SQLITE_BUSY half-way, after its reads were made.
BEGIN IMMEDIATE;

-- name: begin_read!
BEGIN DEFERRED;

-- name: pragma_wal_autocheckpoint$
-- A commit that leaves the WAL at 1000 pages or more checkpoints it (SQLite's default, made
-- explicit because the WAL bound in RELIABILITY.md rests on it).
PRAGMA wal_autocheckpoint = 1000;

-- name: pragma_journal_size_limit_full$
-- When a writer starts the WAL over after a complete checkpoint, cut the file back to 4 MiB
-- (just over 1000 frames of 4 KiB pages). Without it, a WAL that a long reader let grow keeps
-- its largest size on disk for ever.
PRAGMA journal_size_limit = 4194304;

-- name: pragma_journal_size_limit_normal$
-- At NORMAL the log is copied back in rounds (core/wal_checkpoints.py) and starts over at about
-- 1100 to 1900 frames, up to 4000: a 4 MiB limit would cut the file back at nearly every
-- restart, which made the commit that restarts it take 1.1 ms instead of 0.5 (measured, p50).
-- 16 MiB holds the 4000 frames of 4 KiB pages, so only a log that a reader let grow beyond
-- them is cut back.
PRAGMA journal_size_limit = 16777216;

-- name: savepoint_work!
-- Group commit (shell/db/group_commit.py): each work of a batch runs inside this savepoint, so
-- that a refused one rolls back alone. One name serves: the works of a batch run one at a time.
SAVEPOINT work;

-- name: release_work!
RELEASE SAVEPOINT work;

-- name: rollback_to_work!
-- Undo the work's writes; the savepoint stays open until `release_work`.
ROLLBACK TO SAVEPOINT work;
