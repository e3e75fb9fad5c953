"""Who the calling code acts as, for the events its writes append (`core.actors`).

A write reads its actor once, where the call comes in (`current_actor()`), and hands it to the
core's decision with the rest of its inputs, so that a write queued behind others (group commit)
still names its own caller. The API and MCP servers act as each request's token
(`acting_as`); the command line as the identity it was given (`--as`, `[identity] actor` in
the config file, or `AIOS_LEDGER_ACTOR`); an embedding program as what it sets with
`acting_as`, else `AIOS_LEDGER_ACTOR`, else the operating-system user. A declared identity is
recorded as unauthenticated: only a token proves who is asking.
"""

from __future__ import annotations

import functools
import getpass
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from aios_ledger.core.actors import VIA_LIBRARY, Actor
from aios_ledger.core.errors import LedgerError

ACTOR_ENV = "AIOS_LEDGER_ACTOR"
# When the operating system cannot say who is running the process (no passwd entry).
NOBODY = "unauthenticated"

_acting: ContextVar[Actor | None] = ContextVar("aios_ledger_actor", default=None)
# The process's own identity, for writes made where no context says otherwise: threads the
# process starts itself (a worker's, the server's lease sweeper) begin with an empty context.
_process: dict[str, Actor | Callable[[], Actor] | None] = {"actor": None}


def declared_identity(flag: str | None = None, configured: str | None = None) -> str | None:
    """The identity a caller declared, if any: `flag` (the command line's `--as`), else
    `AIOS_LEDGER_ACTOR`, else `configured` (the config file's)."""
    for name in (flag, os.environ.get(ACTOR_ENV) or None, configured):
        if name is not None:
            return name
    return None


def declared_name(flag: str | None = None, configured: str | None = None) -> str:
    """`declared_identity`, else the operating-system user's name."""
    name = declared_identity(flag, configured)
    if name is not None:
        return name
    try:
        return _os_user(tuple(os.environ.get(var) for var in _USER_ENV), os.getuid())
    except (KeyError, OSError):
        return NOBODY


# What `getpass.getuser` reads before the password database.
_USER_ENV = ("LOGNAME", "USER", "LNAME", "USERNAME")


@functools.lru_cache(maxsize=8)
def _os_user(env: tuple[str | None, ...], uid: int) -> str:
    """`getpass.getuser()`, kept per environment and uid: every library write with no declared
    identity asks, and the password database is read from its file at each lookup."""
    return getpass.getuser()


@functools.lru_cache(maxsize=64)
def _declared(name: str, via: str) -> Actor:
    # The same few actors on every write: an actor is immutable, and checked once.
    return Actor(name, via)


def declared_actor(via: str, flag: str | None = None, configured: str | None = None) -> Actor:
    """The unauthenticated actor a caller declared (`declared_name`), come `via` the command
    line or the library; a name that is not one is `ACTOR_INVALID`, naming where it came from."""
    name = declared_name(flag, configured)
    try:
        return _declared(name, via)
    except LedgerError as refused:
        source = "--as" if flag is not None else ACTOR_ENV if os.environ.get(ACTOR_ENV) else None
        where = f"{source}: " if source else ""
        raise LedgerError(refused.code, f"{where}{refused.detail}") from None


def current_actor() -> Actor:
    """The actor of the write being made: the one `acting_as` set in this context, else the
    process's (`process_acting_as`), else the library's declared one."""
    actor = _acting.get()
    if actor is not None:
        return actor
    process = _process["actor"]
    if callable(process):  # resolved at the first write, and kept
        process = _process["actor"] = process()
    return process if process is not None else declared_actor(VIA_LIBRARY)


@contextmanager
def process_acting_as(actor: Actor | Callable[[], Actor]) -> Iterator[None]:
    """Every write the process makes inside, in any thread, names `actor` unless its context
    names another (the command line's identity; a server's own, under its requests' tokens).
    A callable is called at the first write that needs it: a command that writes nothing never
    reads the identity's sources (the config file, say)."""
    before = _process["actor"]
    _process["actor"] = actor
    try:
        yield
    finally:
        _process["actor"] = before


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """Every write made inside (in this thread or task, and in threads it starts through
    `contextvars`) names `actor`."""
    token = _acting.set(actor)
    try:
        yield actor
    finally:
        _acting.reset(token)


def token_actor(name: str, roles: Iterable[str], via: str) -> Actor:
    """The actor a token proves: its name and roles, come `via` HTTP, MCP or the console."""
    return Actor(name, via, tuple(sorted(roles)))


# The header the MCP adapter sends with each call it relays, so that the events name how the
# call came (the token still says who).
VIA_HEADER = "aios-ledger-via"
