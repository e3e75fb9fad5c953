"""Who a request speaks for: the one place that turns a request's credential into a principal.

Every route that takes a token resolves its caller here (`app._endpoint` before it runs a
handler, the event stream again on each of its re-checks), so that a second kind of credential
(the console's HttpOnly session cookie) is added in this module and nowhere else: a
`presented_credential` that finds it, and a `request_principal` that looks it up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aios_ledger.shell.api.tokens import Principal
from starlette.requests import Request

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import Backend


def presented_credential(request: Request) -> str | None:
    """The credential the request carries: its `Authorization: Bearer` token, or None (no
    credential at all, refused before anything else is read)."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def request_principal(request: Request, backend: Backend) -> Principal | None:
    """The principal of the request's credential, or None (none presented, unknown, revoked).
    Blocking (one read on a reader connection): call it on a worker thread."""
    credential = presented_credential(request)
    if credential is None:
        return None
    return backend.principal_now(credential)
