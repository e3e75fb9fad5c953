"""Who a request speaks for: the one place that turns a request's credential into a principal.

Every route that takes a token resolves its caller here (`app._endpoint` before it runs a
handler, the event stream again on each of its re-checks). Two credentials are taken: the
`Authorization: Bearer` token, and, for a read (GET or HEAD) only, the console's HttpOnly
session cookie, so that the console's page script reads the event stream as its signed-in
viewer (an EventSource cannot send a header). A write never takes the cookie: a route that
writes has no CSRF check of its own, and the console's forms go through the console's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aios_ledger.shell.api.tokens import Principal
from starlette.requests import Request

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import Backend


# The cookie that holds a console session's id (read by the console and, for reads, the API).
COOKIE = "aios_console_session"
# The methods a console session may read the API with: reads only.
COOKIE_METHODS = frozenset({"GET", "HEAD"})


def bearer_token(request: Request) -> str | None:
    """The request's `Authorization: Bearer` token, or None."""
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
    """The credential the request carries: its bearer token, else (a read) its console
    session's id, or None (no credential at all, refused before anything else is read)."""
    return bearer_token(request) or session_cookie(request)


def request_principal(request: Request, backend: Backend) -> Principal | None:
    """The principal of the request's credential, or None (none presented, unknown, revoked,
    a session ended). A bearer token wins over a cookie. Blocking (one read on a reader
    connection): call it on a worker thread."""
    token = bearer_token(request)
    if token is not None:
        return backend.principal_now(token)
    if session_cookie(request) is None:
        return None
    viewer = request.app.state.console.viewer_now(request)
    return None if viewer is None else viewer.principal
