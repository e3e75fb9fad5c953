"""Who a request speaks for: the one place that turns a request's credential into a principal.

A read also takes the console's session cookie, since the page script's EventSource cannot send
a header; a write never does, as the API's routes have no CSRF check of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aios_ledger.shell.api.tokens import Principal, authenticate
from starlette.requests import Request

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import Backend


COOKIE = "aios_console_session"
COOKIE_METHODS = frozenset({"GET", "HEAD"})


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def session_cookie(request: Request) -> str | None:
    """The console session's id, on a read of a server that serves the console, or None."""
    if request.method not in COOKIE_METHODS or getattr(request.app.state, "console", None) is None:
        return None
    return request.cookies.get(COOKIE) or None


def presented_credential(request: Request) -> str | None:
    """The request's bearer token, else (on a read) its console session's id."""
    return bearer_token(request) or session_cookie(request)


def request_principal(request: Request, backend: Backend) -> Principal | None:
    """The principal of the request's credential, a bearer token winning over a cookie; call it
    on a worker thread."""
    token = bearer_token(request)
    if token is not None:
        return backend.read_now(lambda stores: authenticate(stores.db, token))
    if session_cookie(request) is None:
        return None
    viewer = request.app.state.console.viewer_now(request)
    return None if viewer is None else viewer.principal
