"""The Database: a ledger's transactions on the engine its target names (`engines.ENGINES`),
the only place that opens a database for the stores."""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from aios_ledger.core import LedgerError
from aios_ledger.core.wal_checkpoints import SYNCHRONOUS_LEVELS
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

DEFAULT_PATH_ENV = "AIOS_LEDGER_DB"


class _SchemaStep(enum.Enum):
    MIGRATE = "migrate"  # apply what is pending (the default)
    REQUIRE_CURRENT = "require_current"  # the schema is the DBA's: refuse one that is behind
    AS_FOUND = "as_found"  # the migrator's own commands read or change the schema themselves


class EngineModule(Protocol):
    """What an engine module provides beside its Connection class (`engines`)."""

    @property
    def NAME(self) -> str:  # noqa: N802 (a module's constant)
        ...

    @property
    def DATABASE(self) -> type[Database]:  # noqa: N802 (a module's constant)
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
    """The module of the engine that opens `target`, imported on first use."""
    return cast(EngineModule, importlib.import_module(registered(target).module))


class Database:
    """A ledger database; `migrate=False` leaves the schema to the DBA, so it opens only a
    current database (else `SCHEMA_TOO_OLD`/`SCHEMA_TOO_NEW`, writing nothing).
    `synchronous` and `vfs` are SQLite's settings; another engine refuses a VFS."""

    engine: str
    # The target as messages show it (a URL without its password).
    path: str
    busy_retries: int
    # Event ids are handed out in commit order without gaps: a missing id is a removed event.
    dense_event_ids: bool
    # A write appends its events' Merkle leaves itself; else an integrator appends them once
    # committed (`shell/db/merkle.py`).
    integrates_inline: bool
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
        # SQLite's setting; PostgreSQL checks it alike and leaves it unused.
        if synchronous not in SYNCHRONOUS_LEVELS:
            raise LedgerError(
                "SYNCHRONOUS_INVALID", f"synchronous must be one of {SYNCHRONOUS_LEVELS}"
            )
        step = _SchemaStep.MIGRATE if migrate else _SchemaStep.REQUIRE_CURRENT
        self._open(path, synchronous, vfs, step)

    @classmethod
    def as_found(cls, path: str | os.PathLike[str] | None) -> Database:
        """Open without the schema step, for the tools that look at or change it themselves."""
        database: Database = cls.__new__(cls, path)
        database._open(path, "FULL", None, _SchemaStep.AS_FOUND)
        return database

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        """Run `work` in one write transaction; commit, or roll back and raise a LedgerError.
        `urgent` jumps group commit's queue; `row_locked` promises `work` locks every row it
        decides on and appends only to those chains, so PostgreSQL may run it beside others."""
        raise NotImplementedError

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one read transaction, so that every read sees the same snapshot."""
        raise NotImplementedError

    def write_schema(self, work: Callable[[SchemaConnection], T]) -> T:
        """`write` for work that runs scripts or ad-hoc SQL (the migrator, `copy`, the tools)."""
        return self.write(cast("Callable[[Connection], T]", work))

    def notify(self, channel: str) -> None:
        """Tell every listener of `channel`, after the commit it announces."""
        raise NotImplementedError

    def listen(self, channel: str) -> Listener:
        """A subscription to `channel`'s notifications from now on, for one thread."""
        raise NotImplementedError

    def cursor_rows(
        self, name: str, params: Params | None = None
    ) -> AbstractContextManager[Iterator[Row]]:
        """Stream a read statement's rows inside the caller's transaction, not all in memory."""
        raise NotImplementedError

    @property
    def pool_size(self) -> int | None:
        """How many connections threads share; None: one, whose writes can share commits."""
        return None

    def quiesce_writers(self) -> None:
        """Wait until every id handed out so far is committed or gone, so that a head read next
        is never passed by a later commit of a lower id."""

    def files_dir(self, kind: str) -> Path:
        """The folder where the ledger keeps its files of `kind` (`proposals`: the bundles)."""
        raise NotImplementedError

    def local_folder(self) -> str | None:
        """The local folder holding the database's files (for the readiness probe), or None."""
        return None

    def read_only_fault(self) -> LedgerError | None:
        """Why this Database can only read (`DATABASE_READ_ONLY`), known without writing."""
        return None

    def start_group_commit(
        self, *, max_batch: int = 64, on_batch: Callable[[int], None] | None = None
    ) -> GroupCommit:
        """Writes from any thread share commits; only an engine of one connection has it."""
        raise LedgerError(
            "USAGE_INVALID",
            "group commit is SQLite's; on PostgreSQL the pool runs concurrent writers",
        )

    def stop_group_commit(self) -> None:
        """Drain and end group commit, if it runs."""
