"""API tokens: who may speak to the ledger over HTTP, and as what. Only a token's sha256 is kept,
never in an event; a revoked name may be issued again, so a lost token keeps its identity."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Final, Literal, TypedDict, cast

import attrs
from aios_ledger.core.actors import ROLES, Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.kinds import Identifier, OneOf, Sha256Hex
from aios_ledger.core.log.plan import Decision, Replay, sealed_plan
from aios_ledger.core.log.rows import RowImage, row_image
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement, guarded_update
from aios_ledger.core.structuring import Structured, structure
from aios_ledger.core.tasks.requests import OfferedCapabilities
from aios_ledger.core.timestamps import Timestamp, require_timestamp

API_TOKENS = "api_tokens"
API_TOKEN_ISSUED = "API_TOKEN_ISSUED"
API_TOKEN_REVOKED = "API_TOKEN_REVOKED"

ACTIVE: Final = "ACTIVE"
REVOKED: Final = "REVOKED"

Role = Annotated[str, OneOf(ROLES)]


def token_sha256(token: str) -> str:
    """The digest the ledger keeps of a token (and looks a presented token up by)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


# A token's grant: listed names, any capability, or none recorded (issued before grants).
GrantKind = Literal["listed", "any", "before-grants"]
# The `capabilities_json` of a token issued with no ceiling (SQL NULL is a token from before).
ANY_CAPABILITY_JSON: Final = "null"


class ApiTokenAnswer(TypedDict):
    """What issuing or revoking answers; `capabilities` is the grant (None: no ceiling)."""

    name: str
    roles: list[str]
    capabilities: list[str] | None
    grant: GrantKind
    status: Literal["ACTIVE", "REVOKED"]
    updated_at: str
    idempotent: bool


class ApiTokenView(TypedDict):
    """A token as `token list` shows it, never its secret nor digest."""

    name: str
    roles: list[str]
    capabilities: list[str] | None
    grant: GrantKind
    status: str
    created_at: str
    updated_at: str


@attrs.frozen
class ApiTokenRow:
    name: str
    roles_json: str
    token_sha256: str
    status: str
    revision: int
    created_at: str
    updated_at: str
    # Last: the column 0.x migration 0012 added. None only in a row issued before it.
    capabilities_json: str | None = None

    def roles(self) -> tuple[str, ...]:
        return tuple(str(role) for role in json.loads(self.roles_json))

    def grant(self) -> frozenset[str] | None:
        """The capabilities this token may offer when it claims; None: no ceiling."""
        if self.capabilities_json is None:
            return None
        decoded = json.loads(self.capabilities_json)
        if decoded is None:
            return None
        if not isinstance(decoded, list) or not all(isinstance(name, str) for name in decoded):
            raise ValueError("capabilities_json is not a list of names")
        return frozenset(decoded)

    def grant_kind(self) -> GrantKind:
        if self.capabilities_json is None:
            return "before-grants"
        return "any" if self.grant() is None else "listed"

    def capabilities(self) -> list[str] | None:
        grant = self.grant()
        return None if grant is None else sorted(grant)

    def image(self) -> RowImage:
        return row_image(API_TOKENS, self.name, attrs.asdict(self))

    def view(self) -> ApiTokenView:
        return {
            "name": self.name,
            "roles": list(self.roles()),
            "capabilities": self.capabilities(),
            "grant": self.grant_kind(),
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@attrs.frozen
class TokenIssueRequest:
    """Issue a token: its name, 1 to 5 roles, and its capability grant."""

    name: Identifier
    roles: list[Role]
    capabilities: OfferedCapabilities = attrs.field(factory=lambda: OfferedCapabilities([]))
    any_capability: bool = False

    @classmethod
    def from_mapping(cls, raw: object) -> TokenIssueRequest:
        request = structure(raw, cls, what="token issue")
        if not request.roles:
            raise LedgerError("FIELDS_INVALID", "token issue: roles: must name at least one role")
        if len(set(request.roles)) != len(request.roles):
            raise LedgerError("FIELDS_INVALID", "token issue: roles: names a role twice")
        if request.any_capability and request.capabilities:
            raise LedgerError(
                "FIELDS_INVALID",
                "token issue: any_capability grants every capability: name capabilities or "
                "give any_capability, not both",
            )
        return attrs.evolve(request, roles=sorted(request.roles, key=ROLES.index))


@attrs.frozen
class TokenRevokeRequest(Structured):
    WHAT = "token revoke"

    name: Identifier


@attrs.frozen
class TokenState:
    """What a token decision reads: the row of its name (None: none yet) and the log's tail."""

    prior: ApiTokenRow | None
    tail: LogTail


def _event(
    kind: str, row: ApiTokenRow, roles: list[str], now: Timestamp, actor: Actor
) -> EventAppend:
    payload: JsonObject = {"name": row.name, "roles": list[JsonValue](roles)}
    if kind == API_TOKEN_ISSUED:
        capabilities = row.capabilities()
        payload["capabilities"] = None if capabilities is None else list[JsonValue](capabilities)
    return EventAppend(
        task_id=None,
        agent_id=None,
        event_type=kind,
        payload=payload,
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )


def _answer(row: ApiTokenRow, *, idempotent: bool) -> ApiTokenAnswer:
    """The row's view without `created_at`, in the same order, and `idempotent`."""
    view = {name: value for name, value in row.view().items() if name != "created_at"}
    return cast(ApiTokenAnswer, {**view, "idempotent": idempotent})


def decide_issue_token(
    state: TokenState,
    request: TokenIssueRequest,
    *,
    now: Timestamp,
    actor: Actor,
    digest: Sha256Hex,
) -> Decision[ApiTokenAnswer]:
    """Store a new token's digest under a free or revoked name."""
    require_timestamp(now)
    prior = state.prior
    roles_json = json.dumps(list(request.roles), separators=(",", ":"))
    capabilities_json = (
        ANY_CAPABILITY_JSON
        if request.any_capability
        else json.dumps(list(request.capabilities), separators=(",", ":"))
    )
    if prior is not None and prior.status == ACTIVE:
        raise LedgerError("TOKEN_NAME_TAKEN", f"a token named {request.name!r} is active")
    if prior is None:
        row = ApiTokenRow(
            request.name, roles_json, digest, ACTIVE, 1, now.text, now.text, capabilities_json
        )
        write = SqlWrite(Statement.API_TOKEN_INSERT, attrs.asdict(row))
    else:
        row = attrs.evolve(
            prior,
            roles_json=roles_json,
            token_sha256=digest,
            status=ACTIVE,
            capabilities_json=capabilities_json,
            revision=prior.revision + 1,
            updated_at=now.text,
        )
        write = guarded_update(Statement.API_TOKEN_CAS_UPDATE, row, prior.revision)
    event = _event(API_TOKEN_ISSUED, row, request.roles, now, actor)
    return sealed_plan((write,), (event,), _answer(row, idempotent=False), tail=state.tail)


def decide_revoke_token(
    state: TokenState, request: TokenRevokeRequest, *, now: Timestamp, actor: Actor
) -> Decision[ApiTokenAnswer]:
    """Revoke a name's token; revoking again writes nothing."""
    require_timestamp(now)
    prior = state.prior
    if prior is None:
        raise LedgerError("TOKEN_NOT_FOUND", f"no token named {request.name!r}")
    if prior.status == REVOKED:
        return Replay(_answer(prior, idempotent=True))
    row = attrs.evolve(prior, status=REVOKED, revision=prior.revision + 1, updated_at=now.text)
    event = _event(API_TOKEN_REVOKED, row, list(row.roles()), now, actor)
    write = guarded_update(Statement.API_TOKEN_CAS_UPDATE, row, prior.revision)
    return sealed_plan((write,), (event,), _answer(row, idempotent=False), tail=state.tail)
