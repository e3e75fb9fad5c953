-- Connection set-up and transaction control. PRAGMAs take no parameters, hence one block each.

-- name: pragma_journal_wal$
PRAGMA journal_mode = WAL;

-- name: pragma_foreign_keys_on!
PRAGMA foreign_keys = ON;

-- name: pragma_synchronous_full!
PRAGMA synchronous = FULL;

-- name: pragma_synchronous_normal!
PRAGMA synchronous = NORMAL;

-- name: pragma_synchronous$
PRAGMA synchronous;

-- name: pragma_integrity_check$
PRAGMA integrity_check;

-- name: begin_immediate!
-- Writers take the write lock up front: a deferred transaction that upgrades can fail with
-- SQLITE_BUSY half-way, after its reads were made.
BEGIN IMMEDIATE;

-- name: begin_read!
BEGIN DEFERRED;

-- name: commit!
COMMIT;

-- name: rollback!
ROLLBACK;
