"""The engines a ledger runs on: what one must provide, and the registry that picks one.

One core and one plan format over one module per engine (SQLite through apsw, PostgreSQL
through psycopg 3), as in eventsourcing's recorder pattern: an engine module is the only place
that names its driver, and everything above it talks to the `Connection` and `Database`
protocols here. `Database(target)` picks the engine the target's URL scheme names in `ENGINES`.

`ENGINES` names each module by import path and loads it on first use, so that adding an engine
is one module, its SQL and one row here (CONTRIBUTING.md, "Adding an engine"), and opening a
SQLite file never imports psycopg.
`tests/test_engine_boundary.py` keeps every other module from naming an engine's types.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import attrs
from aios_ledger.core import LedgerError

if TYPE_CHECKING:
    from aios_ledger.core.log.merkle import IntegrationBound
    from aios_ledger.core.statements import SqlWrite

R = TypeVar("R")
Row = dict[str, Any]
Params = Mapping[str, Any]
# A read of `fetch_together`: a statement, its parameters and the record of its rows.
Read = tuple[str, Params | None, type[Any] | None]


class Connection(Protocol):
    """What a transaction's work gets on an engine (`Database.write` / `read`): reads of named
    statements, a plan's writes with the ids of its events, and the transaction's state.
    Everything an engine does to save round trips (pipelines, reads sent ahead, ids reserved
    ahead, rows carried from one transaction to the next) stays behind these methods, in its
    own module. Notifications (`Database.notify`, `listen`) and the migrator's and tools'
    statements (`SchemaConnection`) are no part of it."""

    # Its row's name in `ENGINES`: the statement texts it runs and its migrations.
    dialect: str

    @property
    def in_transaction(self) -> bool: ...

    # -- reading: a statement's name, its parameters, the record of its rows ------------------

    def fetch_all(self, name: str, params: Params | None) -> list[Row]: ...

    @overload
    def fetch_record(self, name: str, params: Params | None, record: type[R]) -> R | None: ...

    @overload
    def fetch_record(self, name: str, params: Params | None, record: None) -> Any: ...

    def fetch_record(self, name: str, params: Params | None, record: type[R] | None) -> Any:
        """The first row as `record(*columns)` (a record of None: its first column's value);
        the columns are checked against the record's fields once per statement and record in
        each process."""
        ...

    def fetch_together(self, reads: Sequence[Read], *, appending: int = 0) -> list[list[Any]]:
        """Every row of each read as its record (a record of None: its first column's value),
        in one round trip where the engine has them. `appending`: the plan decided on these
        reads will likely append that many events (the engine may reserve their ids)."""
        ...

    def fetch_ahead(self, reads: Sequence[Read], *, appending: int) -> list[list[Any]] | None:
        """The reads of a batch's independent decisions at once, where the engine gains by it
        (as `fetch_together`); None where it does not: each decision reads when it comes."""
        ...

    def stream_records(
        self, name: str, params: Params | None, record: type[R]
    ) -> Generator[R, None, None]:
        """Each row as `record(*columns)`; closing the generator finishes the statement."""
        ...

    def stream_tuples(
        self, name: str, columns: tuple[str, ...]
    ) -> AbstractContextManager[Iterator[tuple[Any, ...]]]:
        """A read's rows as tuples, in constant memory, after checking that it returns
        `columns` (`STATEMENT_INVALID` otherwise): the verifier's streams."""
        ...

    # -- writing a plan -------------------------------------------------------------------------

    def run_plan(self, writes: Sequence[SqlWrite], error: type[LedgerError]) -> None:
        """A plan's statements in order; a guarded write that changed another number of rows
        than one is `error("REVISION_CONFLICT", ...)` (`run.revision_conflict`)."""
        ...

    def first_event_id(self, chains: Collection[str]) -> int:
        """The id a decision numbers its first event with, on the tail of `chains`: the id the
        next event gets, or a provisional one that `number_events` replaces (as far as a read
        can tell, in a read)."""
        ...

    def number_events(self, first: int, count: int) -> list[int]:
        """The ids of a decided plan's `count` events, numbered from `first` when decided (the
        shared append step, `apply.PlanExecutor`, renumbers them when these differ)."""
        ...

    def run_write(self, name: str, params: Params | None) -> int:
        """Run a named statement; how many rows it changed."""
        ...

    # Whether a write appends its events' Merkle leaves itself (one writer: commit order is
    # id order), or an integrator appends them after they commit (writers beside each other).
    integrates_inline: bool

    def integration_bound(self, waiting: Sequence[str]) -> IntegrationBound:
        """An integration pass's start, under the integrators' lock: how many of `waiting`
        (the transactions the previous pass saw in progress) still run, the last event id
        handed out, and the transactions in progress now (`core.log.merkle.ScanFloor`)."""
        ...


class SchemaConnection(Connection, Protocol):
    """What the migrator, `copy` and the tools get (`Database.write_schema`): the write path's
    connection and the statements the ledger's own writes never run."""

    def run_many(self, name: str, rows: Sequence[Params]) -> None:
        """One statement over many rows (`copy`'s inserts)."""
        ...

    def run_script(self, text: str) -> None:
        """A migration's section: several statements, no parameters."""
        ...

    def prepare_schema(self) -> None:
        """Before migrating, under the write lock: make the place the ledger's tables go."""
        ...

    def execute(self, text: str, params: Any = None, /) -> Any:
        """Ad-hoc SQL for tools and tests that look at a ledger's tables (`:name` or `?`
        parameters); the ledger itself names its statements."""
        ...


class Listener(Protocol):
    """A subscription to a channel's notifications (`Database.listen`), for one thread."""

    def wait(self, timeout: float) -> bool:
        """Whether a notification came since the last wait (or the listening began), waiting
        up to `timeout` seconds for one."""
        ...

    def close(self) -> None: ...


@attrs.frozen
class Registered:
    """A row of `ENGINES`: an engine's name (its dialect), its module, the URL schemes that
    select it (None: a target that is not a URL, a file's path), how its targets are written
    (messages), and the packages of its own statement texts and of its migrations."""

    name: str
    module: str
    schemes: tuple[str | None, ...]
    forms: str
    sql: str
    migrations: str


# The registry: the first row whose schemes hold a target's scheme opens it.
ENGINES: tuple[Registered, ...] = (
    Registered(
        "sqlite",
        "aios_ledger.shell.db.engines.sqlite",
        (None,),
        "a SQLite file's path (e.g. ./ledger.db)",
        "aios_ledger.sql.sqlite",
        # dbmate reads each engine's folder: SQLite's stayed where its users' commands name it.
        "aios_ledger.sql.migrations",
    ),
    Registered(
        "postgresql",
        "aios_ledger.shell.db.engines.postgresql",
        ("postgresql", "postgres"),
        "a PostgreSQL URL: postgresql://user@host:port/dbname, postgres://..., "
        "postgresql:///dbname for the local socket, with ?search_path=schema to choose the "
        "ledger's schema (default aios_ledger)",
        "aios_ledger.sql.postgresql",
        "aios_ledger.sql.postgresql.migrations",
    ),
)
SUPPORTED_FORMS = ", or ".join(engine.forms for engine in ENGINES)
_BY_SCHEME = {scheme: engine for engine in ENGINES for scheme in engine.schemes}
URL_SCHEMES = tuple(scheme for scheme in _BY_SCHEME if scheme is not None)
# What reads as a URL (RFC 3986's scheme, then `//`) rather than a file name that holds a colon.
_URL_SHAPE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(target: object) -> str | None:
    """The scheme of `target` when it reads as a URL (`scheme://...`), else None (a file name)."""
    if not isinstance(target, str):
        return None
    shape = _URL_SHAPE.match(target)
    return shape.group(1).lower() if shape else None


def is_database_url(target: object) -> bool:
    """Whether `target` is the URL of a registered engine's database (not a file's path)."""
    return url_scheme(target) in URL_SCHEMES


def refuse_unsupported_url(target: str) -> None:
    """A URL of another scheme (`mysql://`, `sqlite://`, `http://`) is a mistake, never a file
    name: SQLite would take `mysql://h/db` as the file `db` in the folder `mysql:/h`."""
    scheme = url_scheme(target)
    if scheme is not None and scheme not in _BY_SCHEME:
        raise LedgerError(
            "DATABASE_URL_UNSUPPORTED",
            f"{target[:200]!r}: {scheme}:// is not a database this ledger opens; give "
            + SUPPORTED_FORMS,
        )


def registered(target: object) -> Registered:
    """The row that opens `target`; a URL of no registered scheme goes to the engine of paths,
    whose checks refuse it (`refuse_unsupported_url`) after the path's own. Its module is
    loaded by `connection.engine_for`."""
    return _BY_SCHEME.get(url_scheme(target)) or _BY_SCHEME[None]


def engine_names() -> tuple[str, ...]:
    """Every registered engine, in the registry's order (the both-engines tests run each)."""
    return tuple(engine.name for engine in ENGINES)
