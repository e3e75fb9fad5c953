"""Who the calling code acts as, for the events its writes append (`core.actors`).

A write reads its actor once, where the call comes in, so that a write queued behind others
(group commit) still names its own caller. A declared identity (`--as`, `AIOS_LEDGER_ACTOR`, the
config file, the operating-system user) is recorded as unauthenticated: only a token proves who.
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
# The process's own identity: threads it starts itself begin with an empty context.
_process: dict[str, Actor | Callable[[], Actor] | None] = {"actor": None}


def declared_identity(flag: str | None = None) -> str | None:
    """The identity a caller declared, if any: `flag`, else the environment."""
    return flag if flag is not None else os.environ.get(ACTOR_ENV) or None


# What `getpass.getuser` reads before the password database.
_USER_ENV = ("LOGNAME", "USER", "LNAME", "USERNAME")


@functools.lru_cache(maxsize=8)
def _os_user(env: tuple[str | None, ...], uid: int) -> str:
    """`getpass.getuser()`, kept per environment and uid: it reads the password file each time."""
    return getpass.getuser()


@functools.lru_cache(maxsize=64)
def _declared(name: str, via: str) -> Actor:
    # The same few actors on every write: an actor is immutable, and checked once.
    return Actor(name, via)


def declared_actor(via: str, flag: str | None = None) -> Actor:
    """The unauthenticated actor a caller declared, else the operating-system user; a refused
    name says where it came from."""
    name = declared_identity(flag)
    if name is None:
        try:
            name = _os_user(tuple(os.environ.get(var) for var in _USER_ENV), os.getuid())
        except (KeyError, OSError):
            name = NOBODY
    try:
        return _declared(name, via)
    except LedgerError as refused:
        source = "--as" if flag is not None else ACTOR_ENV if os.environ.get(ACTOR_ENV) else None
        where = f"{source}: " if source else ""
        raise LedgerError(refused.code, f"{where}{refused.detail}") from None


def current_actor() -> Actor:
    """The actor `acting_as` set in this context, else the process's, else the declared one."""
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
    names another; a callable is called only at the first write that needs it."""
    before = _process["actor"]
    _process["actor"] = actor
    try:
        yield
    finally:
        _process["actor"] = before


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """Every write made inside this context names `actor`."""
    token = _acting.set(actor)
    try:
        yield actor
    finally:
        _acting.reset(token)


def token_actor(name: str, roles: Iterable[str], via: str) -> Actor:
    """The actor a token proves: its name and roles, come `via` HTTP, MCP or the console."""
    return Actor(name, via, tuple(sorted(roles)))


# The MCP adapter sends this header with each call it relays, so events name how a call came.
VIA_HEADER = "aios-ledger-via"
