"""The Database: a ledger's transactions on the engine its target names. The only place that
opens a database for the stores.

`Database(target)` is the Database of the engine that the target's URL scheme selects in the
registry (`engines.ENGINES`): SQLite for a path (or None: in memory, `engines/sqlite.py`),
PostgreSQL for a `postgresql://` URL (`engines/postgresql.py`). This class holds what every
engine shares (the constructor, the schema step's choice, `as_found`, closing as a context
manager) and declares what each engine's Database provides; the statements inside a
transaction run through the helpers of `run` (re-exported here with the Database they run in)
on the engine's `Connection`.
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from aios_ledger.core import LedgerError
from aios_ledger.shell.db.engines import Listener, is_database_url, registered
from aios_ledger.shell.db.run import (
    Connection,
    Params,
    Row,
    SchemaConnection,
    execute,
    fetch_all,
    fetch_one,
    fetch_record,
    fetch_value,
    stream_records,
)

if TYPE_CHECKING:
    from aios_ledger.shell.db.group_commit import GroupCommit

__all__ = [
    "DEFAULT_PATH_ENV",
    "Connection",
    "Database",
    "EngineModule",
    "Listener",
    "Params",
    "Row",
    "SchemaConnection",
    "execute",
    "fetch_all",
    "fetch_one",
    "fetch_record",
    "fetch_value",
    "engine_for",
    "is_database_url",
    "stream_records",
]

T = TypeVar("T")

SYNCHRONOUS_LEVELS = ("FULL", "NORMAL")
DEFAULT_PATH_ENV = "AIOS_LEDGER_DB"


class _SchemaStep(enum.Enum):
    MIGRATE = "migrate"  # apply what is pending (the default)
    REQUIRE_CURRENT = "require_current"  # the schema is the DBA's: refuse one that is behind
    AS_FOUND = "as_found"  # the migrator's own commands read or change the schema themselves


class EngineModule(Protocol):
    """What an engine module provides beside its Connection class (`engines`)."""

    @property
    def NAME(self) -> str:  # noqa: N802 (a module's constant)
        """The engine's name, as the registry lists it."""
        ...

    @property
    def DATABASE(self) -> type[Database]:  # noqa: N802 (a module's constant)
        """Its Database class, which `Database(target)` makes."""
        ...

    def require_ledger(self, target: str) -> None:
        """Refuse a target that holds no ledger (`DATABASE_NOT_FOUND`), creating nothing."""
        ...

    def require_creatable(self, target: str) -> None:
        """Refuse a target where `init` cannot create a ledger (`DATABASE_NOT_FOUND`)."""
        ...

    def schema_sql(self, target: str | None) -> str:
        """The schema after every migration, as its DBAs read it (`schema-dump`)."""
        ...


def engine_for(target: object) -> EngineModule:
    """The module of the engine that opens `target` (a path, a URL, or None: in memory), as
    the registry (`engines.ENGINES`) names it, imported on first use."""
    return cast(EngineModule, importlib.import_module(registered(target).module))


class Database:
    """A ledger database on the engine its target names (see the module's docstring), with
    its schema step on open.

    `migrate=True` (the default) applies pending migrations on open, adopting the older
    runtime's database. `migrate=False` leaves the schema to the DBA (`aios-ledger migrate`,
    dbmate): it opens only a current database, refuses one that is behind (or not a ledger
    yet, or missing) with `SCHEMA_TOO_OLD` and a newer one with `SCHEMA_TOO_NEW`, and a refused
    open writes nothing. `Database.as_found` skips the step for the tools that run the migrator
    themselves. `synchronous` (FULL or NORMAL) and `vfs` are SQLite's settings; on another
    engine a VFS is refused and the level checked alike."""

    # The engine's name, as the registry lists it.
    engine: str
    # The target as messages show it (a file's path; a URL without its password).
    path: str
    # Transactions retried after the engine said busy (observability only).
    busy_retries: int
    # Event ids are handed out in commit order without gaps, so a missing id is a removed
    # event, and a reader never sees a lower id commit after a higher one.
    dense_event_ids: bool
    # The driver's own error, which the Database turns into LedgerErrors.
    driver_error: type[Exception] = Exception
    # Whether `aios-ledger copy` writes into it.
    takes_copies = False

    def __new__(cls, path: str | os.PathLike[str] | None = None, *args: Any, **kwargs: Any) -> Any:
        if cls is Database:
            return object.__new__(engine_for(path).DATABASE)
        return object.__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        synchronous: str = "FULL",
        migrate: bool = True,
        vfs: str | None = None,
    ) -> None:
        step = _SchemaStep.MIGRATE if migrate else _SchemaStep.REQUIRE_CURRENT
        self._open(path, synchronous, vfs, step)

    @classmethod
    def as_found(cls, path: str | os.PathLike[str] | None) -> Database:
        """Open without the schema step: for `aios-ledger init`, `migrate` and `migrate
        --status`, and callers of `migrate_database`, which look at or change it themselves."""
        database: Database = cls.__new__(cls, path)
        database._open(path, "FULL", None, _SchemaStep.AS_FOUND)
        return database

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what each engine's Database provides ---------------------------------------------------

    def _open(
        self,
        path: str | os.PathLike[str] | None,
        synchronous: str,
        vfs: str | None,
        step: _SchemaStep,
    ) -> None:
        """Connect, then take the schema step; a refused open leaves nothing open."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def write(
        self, work: Callable[[Connection], T], *, row_locked: bool = False, urgent: bool = False
    ) -> T:
        """Run `work` in one write transaction (SQLite's `BEGIN IMMEDIATE`); commit, or roll
        back and raise a LedgerError.

        `urgent`: a lease renewal, which group commit takes ahead of the writes queued without
        it (`group_commit.py`); an engine of concurrent writers has no queue to jump.

        `row_locked`: `work` reads every row it decides on with a locking statement
        (`get_task_for_update`, the claim's SKIP LOCKED batch) and appends events only to the
        chains of the tasks it locked: a task's own transitions. An engine with concurrent
        writers (PostgreSQL) then runs it beside other row-locked writers; SQLite has one
        writer whatever it says."""
        raise NotImplementedError

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one read transaction, so that every read sees the same snapshot."""
        raise NotImplementedError

    def write_schema(self, work: Callable[[SchemaConnection], T]) -> T:
        """`write` for the migrator, `copy` and the tools, whose work runs scripts, many rows
        or ad-hoc SQL: every engine's connection is a `SchemaConnection` as well."""
        return self.write(cast("Callable[[Connection], T]", work))

    def notify(self, channel: str) -> None:
        """Tell every listener of `channel` (`listen`), in this process and, where the engine
        reaches them, in others: called after the commit it announces."""
        raise NotImplementedError

    def listen(self, channel: str) -> Listener:
        """A subscription to `channel`'s notifications from now on, for one thread; the caller
        closes it."""
        raise NotImplementedError

    def cursor_rows(
        self, name: str, params: Params | None = None
    ) -> AbstractContextManager[Iterator[Row]]:
        """Stream a read statement's rows, inside the caller's transaction (`read` or
        `write`), without holding them all in memory."""
        raise NotImplementedError

    @property
    def pool_size(self) -> int | None:
        """How many connections it shares among threads (concurrent writers, each in a
        transaction of its own); None: one connection, whose writes can share commits
        (`start_group_commit`)."""
        return None

    def quiesce_writers(self) -> None:
        """Wait until every id handed out so far is committed or gone for good, so that a head
        read next is never passed by a later commit of a lower id (nothing to wait for where
        ids are handed out in commit order)."""

    def files_dir(self, kind: str) -> Path:
        """The folder where the ledger keeps its files of `kind` (`proposals`: the bundles)."""
        raise NotImplementedError

    def local_folder(self) -> str | None:
        """The folder on this machine that holds the database's own files (whose free space a
        readiness probe checks), or None for a server's."""
        return None

    def read_only_fault(self) -> LedgerError | None:
        """Why this Database can only read (`DATABASE_READ_ONLY`), known without writing."""
        return None

    def start_group_commit(
        self, *, max_batch: int = 64, on_batch: Callable[[int], None] | None = None
    ) -> GroupCommit:
        """Writes from any thread share commits (`group_commit`): an engine of one
        connection's; with a pool (`pool_size`), concurrent writers run instead."""
        raise LedgerError(
            "USAGE_INVALID",
            f"group commit is for one connection; on {self.engine} the pool runs concurrent "
            "writers",
        )

    def stop_group_commit(self) -> None:
        """Drain and end group commit, if it runs."""
