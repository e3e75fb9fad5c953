"""The engines a ledger runs on: what one must provide, and the registry that picks one.

An engine module is the only place that names its driver; everything above it talks to the
protocols here. `ENGINES` loads each module on first use, so that opening a SQLite file never
imports psycopg, and adding an engine is one module, its SQL and one row.
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
    """What a transaction's work gets on an engine: reads of named statements and a plan's
    writes. Whatever an engine does to save round trips stays behind these methods."""

    # Its row's name in `ENGINES`: the statement texts it runs and its migrations.
    dialect: str

    @property
    def in_transaction(self) -> bool: ...

    def fetch_all(self, name: str, params: Params | None) -> list[Row]: ...

    @overload
    def fetch_record(self, name: str, params: Params | None, record: type[R]) -> R | None: ...

    @overload
    def fetch_record(self, name: str, params: Params | None, record: None) -> Any: ...

    def fetch_record(self, name: str, params: Params | None, record: type[R] | None) -> Any:
        """The first row as `record(*columns)` (a record of None: its first column's value)."""

    def fetch_together(self, reads: Sequence[Read], *, appending: int = 0) -> list[list[Any]]:
        """Every row of each read as its record, in one round trip where the engine has them.
        `appending`: how many events the plan decided on them will likely append."""

    def fetch_ahead(self, reads: Sequence[Read], *, appending: int) -> list[list[Any]] | None:
        """A batch's independent reads at once (`fetch_together`); None where nothing is gained."""

    def stream_records(
        self, name: str, params: Params | None, record: type[R]
    ) -> Generator[R, None, None]:
        """Each row as `record(*columns)`; closing the generator finishes the statement."""

    def stream_tuples(
        self, name: str, columns: tuple[str, ...]
    ) -> AbstractContextManager[Iterator[tuple[Any, ...]]]:
        """A read's rows as tuples in constant memory, after checking it returns `columns`."""

    def run_plan(self, writes: Sequence[SqlWrite], error: type[LedgerError]) -> None:
        """A plan's statements; a guarded write not changing one row is REVISION_CONFLICT."""

    def first_event_id(self, chains: Collection[str]) -> int:
        """The id a decision numbers its first event with (perhaps provisional: `number_events`)."""

    def number_events(self, first: int, count: int) -> list[int]:
        """The ids of a decided plan's `count` events, numbered from `first` when decided."""

    def run_write(self, name: str, params: Params | None) -> int: ...

    # Whether a write appends its events' Merkle leaves itself, or an integrator does later.
    integrates_inline: bool

    def integration_bound(self, waiting: Sequence[str]) -> IntegrationBound:
        """An integration pass's start, under the integrators' lock (`merkle.ScanFloor`)."""


class SchemaConnection(Connection, Protocol):
    """What the migrator, `copy` and the tools get (`Database.write_schema`)."""

    def run_many(self, name: str, rows: Sequence[Params]) -> None: ...

    def run_script(self, text: str) -> None: ...

    def prepare_schema(self) -> None:
        """Before migrating, under the write lock: make the place the tables go."""

    def execute(self, text: str, params: Any = None, /) -> Any:
        """Ad-hoc SQL for tools and tests (`:name` or `?` parameters)."""


class Listener(Protocol):
    """A subscription to a channel's notifications (`Database.listen`), for one thread."""

    def wait(self, timeout: float) -> bool:
        """Whether a notification came since the last wait, waiting up to `timeout` seconds."""

    def close(self) -> None: ...


@attrs.frozen
class Registered:
    """A row of `ENGINES`: name (dialect), module, URL schemes (None: a path), how its targets
    are written (for messages), and the packages of its statements and migrations."""

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
    """A URL of another scheme is a mistake, never a file name (`mysql://h/db`)."""
    scheme = url_scheme(target)
    if scheme is not None and scheme not in _BY_SCHEME:
        raise LedgerError(
            "DATABASE_URL_UNSUPPORTED",
            f"{target[:200]!r}: {scheme}:// is not a database this ledger opens; give "
            + SUPPORTED_FORMS,
        )


def registered(target: object) -> Registered:
    """The row that opens `target`; a URL of no registered scheme goes to the engine of paths,
    whose checks refuse it."""
    return _BY_SCHEME.get(url_scheme(target)) or _BY_SCHEME[None]


def check_streamed(name: str, found: tuple[str, ...], columns: tuple[str, ...]) -> None:
    """A stream read as tuples must return the columns its reader expects."""
    if found != columns:
        raise LedgerError("STATEMENT_INVALID", f"{name} returns {found}, expected {columns}")


def engine_names() -> tuple[str, ...]:
    """Every registered engine, in the registry's order."""
    return tuple(engine.name for engine in ENGINES)
