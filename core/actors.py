"""Who caused an event, kept in its row under its seal: a token proves an actor over HTTP and MCP;
elsewhere a declared identity is marked unauthenticated."""

from __future__ import annotations

import functools
import re
from typing import Final

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, dumps_canonical, loads_document

# How the request reached the ledger; the first three prove the actor by a token.
VIA_HTTP: Final = "http"
VIA_MCP: Final = "mcp"
VIA_CONSOLE: Final = "console"
VIA_CLI: Final = "cli"
VIA_LIBRARY: Final = "library"
VIA_LEDGER: Final = "ledger"
AUTHENTICATED_VIA: Final = frozenset({VIA_HTTP, VIA_MCP, VIA_CONSOLE, VIA_LEDGER})
VIAS: Final = frozenset({*AUTHENTICATED_VIA, VIA_CLI, VIA_LIBRARY})

# The roles a token grants: what each may do is `core.api.tokens`' and the transition table's.
AGENT = "agent"
REVIEWER = "reviewer"
OWNER = "owner"
AUDITOR = "auditor"
# A witness reads checkpoints and proofs and sends cosignatures, nothing else.
WITNESS = "witness"
ROLES: tuple[str, ...] = (AGENT, REVIEWER, OWNER, AUDITOR, WITNESS)

UNKNOWN_ACTOR: Final = "unknown"
# An actor's name: printable, no control characters, bounded (a token name or a declared id).
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_ROLE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@attrs.frozen
class Actor:
    """A principal: `name`, `via` (one of `VIAS`) and `roles` (a token's roles, sorted)."""

    name: str
    via: str
    roles: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if (
            type(self.name) is not str
            or not _NAME.match(self.name)
            or self.name != self.name.strip()
        ):
            raise LedgerError("ACTOR_INVALID", "an actor's name is 1-128 printable characters")
        if self.via not in VIAS:
            raise LedgerError("ACTOR_INVALID", f"an actor comes via one of {sorted(VIAS)}")
        if any(type(role) is not str or not _ROLE.match(role) for role in self.roles):
            raise LedgerError("ACTOR_INVALID", "an actor's roles are lower-case identifiers")
        if list(self.roles) != sorted(set(self.roles)):
            object.__setattr__(self, "roles", tuple(sorted(set(self.roles))))

    @property
    def authenticated(self) -> bool:
        """Whether a credential proved the actor, rather than the caller declaring who it is."""
        return self.via in AUTHENTICATED_VIA

    def public(self) -> JsonObject:
        return {
            "name": self.name,
            "via": self.via,
            "roles": list(self.roles),
            "authenticated": self.authenticated,
        }

    def stored(self) -> str:
        """The text kept in `events.actor` (and covered by the event's seal)."""
        return _stored(self.name, self.via, self.roles)

    def label(self) -> str:
        """How a person reads it: `alice (owner, http)`, `ci (cli, unauthenticated)`."""
        how = [*self.roles, self.via]
        if not self.authenticated:
            how.append("unauthenticated")
        return f"{self.name} ({', '.join(how)})"


def actor_from_stored(text: str | None) -> Actor | None:
    """An event row's actor, None for none: a reader of the log must not fail on one row."""
    if text is None:
        return None
    try:
        document = loads_document(text, what="event actor")
        if not isinstance(document, dict) or set(document) != {"name", "via", "roles"}:
            return None
        roles = document["roles"]
        if not isinstance(roles, list):
            return None
        return Actor(document["name"], document["via"], tuple(roles))  # type: ignore[arg-type]
    except LedgerError:
        return None


def actor_label(text: str | None) -> str:
    """A stored actor as a person reads it; `unknown` when the event names none."""
    actor = actor_from_stored(text)
    return UNKNOWN_ACTOR if actor is None else actor.label()


def actor_label_of(public: JsonObject | None) -> str:
    """An actor as the API shows it (`Actor.public`), as a person reads it."""
    if public is None:
        return UNKNOWN_ACTOR
    roles = public.get("roles")
    try:
        return Actor(
            public.get("name"),  # type: ignore[arg-type]
            public.get("via"),  # type: ignore[arg-type]
            tuple(roles) if isinstance(roles, list) else (),  # type: ignore[arg-type]
        ).label()
    except LedgerError:
        return UNKNOWN_ACTOR


def actor_public(text: str | None) -> JsonObject | None:
    """A stored actor as the API shows it (None: unknown)."""
    actor = actor_from_stored(text)
    return None if actor is None else actor.public()


def the_ledger(role: str) -> Actor:
    """The ledger acting on its own, as `role` (e.g. `lease-sweeper`)."""
    return Actor(role, VIA_LEDGER)


@functools.lru_cache(maxsize=256)
def _stored(name: str, via: str, roles: tuple[str, ...]) -> str:
    # Every event stores its actor as this text; a process has few actors: each is encoded once.
    return dumps_canonical({"name": name, "via": via, "roles": list(roles)})
