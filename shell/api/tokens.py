"""API tokens in the ledger: issue, revoke, list, and the lookup of a presented bearer token's
principal. Only a token's sha256 is ever stored, and compared in constant time."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Sequence
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.api.tokens import (
    ACTIVE,
    ApiTokenAnswer,
    ApiTokenRow,
    ApiTokenView,
    TokenIssueRequest,
    TokenRevokeRequest,
    TokenState,
    decide_issue_token,
    decide_revoke_token,
    token_sha256,
)
from aios_ledger.core.kinds import Sha256Hex
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.records import record_from_row
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_record
from aios_ledger.shell.db.run import Connection

TOKEN_BYTES = 32
# A presented token longer than this is not one the ledger issued: refused before digesting.
MAX_TOKEN_LENGTH = 512


@attrs.frozen
class Principal:
    """Who a request speaks for; `grant` None: a token issued before grants, no ceiling."""

    name: str
    roles: frozenset[str]
    grant: frozenset[str] | None = None


def _row(conn: Connection, name: str) -> ApiTokenRow | None:
    return fetch_record(conn, "api_token_get", {"name": name}, ApiTokenRow)


def issue_token(
    db: Database,
    name: str,
    roles: list[str],
    *,
    capabilities: Sequence[str] = (),
    any_capability: bool = False,
    clock: Clock = system_clock,
) -> dict[str, Any]:
    """Issue a token for `name` granted `capabilities`, or any with `any_capability`; the answer
    holds the token, the only time it is ever shown."""
    request = TokenIssueRequest.from_mapping(
        {
            "name": name,
            "roles": roles,
            "capabilities": list(capabilities),
            "any_capability": any_capability,
        }
    )
    token = secrets.token_urlsafe(TOKEN_BYTES)
    digest = Sha256Hex(token_sha256(token))
    actor = current_actor()

    def write(conn: Connection) -> ApiTokenAnswer:
        plans = PlanExecutor(conn)
        state = TokenState(_row(conn, request.name), plans.tail(LEDGER_CHAIN))
        return plans.apply(
            decide_issue_token(state, request, now=read_clock(clock), digest=digest, actor=actor)
        )

    answer = db.write(write)
    return {**answer, "token": token}


def revoke_token(db: Database, name: str, *, clock: Clock = system_clock) -> ApiTokenAnswer:
    request = TokenRevokeRequest.from_mapping({"name": name})
    actor = current_actor()

    def write(conn: Connection) -> ApiTokenAnswer:
        plans = PlanExecutor(conn)
        state = TokenState(_row(conn, request.name), plans.tail(LEDGER_CHAIN))
        return plans.apply(decide_revoke_token(state, request, now=read_clock(clock), actor=actor))

    return db.write(write)


def list_tokens(db: Database) -> list[ApiTokenView]:
    rows = db.read(lambda conn: fetch_all(conn, "all_api_tokens"))
    return [record_from_row(ApiTokenRow, row).view() for row in rows]


def authenticate(db: Database, token: str) -> Principal | None:
    """The principal of an active token, or None."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return authenticate_digest(db, token_sha256(token))


def authenticate_digest(db: Database, digest: str) -> Principal | None:
    """The principal of the active token whose sha256 is `digest`, or None: the console's
    sessions keep the digest, never the token."""
    row = db.read(
        lambda conn: fetch_record(
            conn, "api_token_by_digest", {"token_sha256": digest}, ApiTokenRow
        )
    )
    if row is None or not hmac.compare_digest(row.token_sha256, digest) or row.status != ACTIVE:
        return None
    try:
        return Principal(row.name, frozenset(row.roles()), row.grant())
    except (ValueError, TypeError):  # a roles column no plan wrote
        raise LedgerError(
            "TOKEN_ROW_INVALID", f"the token row of {row.name!r} is unreadable"
        ) from None
