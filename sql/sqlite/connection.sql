-- SQLite's texts of ../connection.sql's statements that differ on PostgreSQL, and its own.
-- PRAGMAs take no parameters, hence one block each.

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
-- SQLite's default, made explicit because the WAL bound in RELIABILITY.md rests on it.
PRAGMA wal_autocheckpoint = 1000;

-- name: pragma_journal_size_limit_full$
-- Cut the WAL back to 4 MiB when it starts over, so one a long reader let grow does not keep
-- its largest size for ever.
PRAGMA journal_size_limit = 4194304;

-- name: pragma_journal_size_limit_normal$
-- At NORMAL the WAL starts over at up to 4000 frames (core/wal_checkpoints.py): 16 MiB holds
-- them, so only a WAL a reader let grow beyond that is cut back.
PRAGMA journal_size_limit = 16777216;

-- name: savepoint_work!
-- Group commit runs each work of a batch in this savepoint, so a refused one rolls back alone.
SAVEPOINT work;

-- name: release_work!
RELEASE SAVEPOINT work;

-- name: rollback_to_work!
-- Undo the work's writes; the savepoint stays open until `release_work`.
ROLLBACK TO SAVEPOINT work;

-- name: checkpoint_signer_lock$
-- PostgreSQL's lock between checkpoint signers; a SQLite write transaction is alone already.
SELECT 1;
