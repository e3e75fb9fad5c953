"""The console's frame: sessions, CSRF, the common layout, and one wrapper (`_page_endpoint`)
that every page goes through, so that none can skip the session, role and CSRF checks.

No token is ever put in a page, a URL, a redirect or a log line: sign-in reads it from the
form's body and keeps only its digest.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import attrs
import jinja2
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import ROLES, VIA_CONSOLE
from aios_ledger.core.api.tokens import token_sha256
from aios_ledger.shell.actors import acting_as, token_actor
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.api.backend import Backend
from aios_ledger.shell.api.principals import COOKIE
from aios_ledger.shell.api.problems import status_of
from aios_ledger.shell.api.tokens import MAX_TOKEN_LENGTH, Principal, authenticate_digest
from aios_ledger.shell.web.assets import StaticAssets
from aios_ledger.shell.web.sessions import Session, SessionSettings, SessionStore
from aios_ledger.shell.web.verify_runs import VerifyRunner
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

LOG = logging.getLogger("aios_ledger.console")

HERE = Path(__file__).resolve().parent
CSRF_FIELD = "csrf_token"
SIGN_IN = "/sign-in"
HOME = "/tasks"
# A console form is a few fields: a larger body is refused unread.
MAX_FORM_BYTES = 16 * 1024
# Every page: its own resources only, never framed, never cached, no referrer to elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@attrs.frozen
class Viewer:
    """Who a page is shown to: the session's principal, and the session."""

    principal: Principal
    session: Session

    def may(self, roles: frozenset[str]) -> bool:
        return not self.principal.roles.isdisjoint(roles)

    @property
    def roles(self) -> list[str]:
        return [role for role in ROLES if role in self.principal.roles]


@attrs.frozen
class Visit:
    request: Request
    viewer: Viewer
    form: Mapping[str, str]
    backend: Backend

    def query(self, name: str) -> str | None:
        """A query parameter, stripped; None when absent or blank (an empty filter field)."""
        value = self.request.query_params.get(name, "").strip()
        return value or None

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])


@attrs.frozen
class Rendered:
    template: str
    context: Mapping[str, Any]
    status: int = 200


PageHandler = Callable[[Visit], Rendered | Response]


@attrs.frozen
class Page:
    """One page (or one action: a POST) of the console; `nav`: its label in the navigation."""

    path: str
    name: str
    handler: PageHandler
    roles: frozenset[str]
    methods: tuple[str, ...] = ("GET",)
    nav: str | None = None


def see_other(path: str) -> RedirectResponse:
    """The answer of a POST that worked, or of a page that lives elsewhere (303: GET it)."""
    return RedirectResponse(path, status_code=303)


def same_origin(request: Request) -> bool:
    """Whether the browser says, by `Sec-Fetch-Site` or `Origin`, that this POST comes from the
    console's own pages."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return False
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


async def read_form(request: Request) -> dict[str, str]:
    """A POST's urlencoded fields (the last of a repeated name), at most MAX_FORM_BYTES."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise LedgerError("BODY_TOO_LARGE", f"a console form is at most {MAX_FORM_BYTES} bytes")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        raise LedgerError("FIELDS_INVALID", "the form is not UTF-8") from None


class Console:
    def __init__(self, backend: Backend, settings: SessionSettings, pages: Sequence[Page]) -> None:
        self.backend = backend
        self.sessions = SessionStore(settings)
        self.verify_runs = VerifyRunner(backend)
        self.pages = tuple(pages)
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.assets = StaticAssets(HERE / "static")
        environment.globals["asset"] = self.assets.url
        self.templates = Jinja2Templates(env=environment)

    # -- who is signed in ---------------------------------------------------------------

    def viewer_now(self, request: Request) -> Viewer | None:
        """The signed-in viewer of a request, on a worker thread; a session whose token no
        longer authenticates is ended."""
        session_id = request.cookies.get(COOKIE)
        if not session_id:
            return None
        session = self.sessions.find(session_id)
        if session is None:
            return None
        digest = session.token_sha256
        principal = self.backend.read_now(lambda s: authenticate_digest(s.db, digest))
        if principal is None:
            self.sessions.close(session_id)
            return None
        return Viewer(principal, session)

    def sign_in_now(self, token: str) -> tuple[str, Session] | None:
        """A new session for a token that authenticates and has a role the console serves."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        digest = token_sha256(token)
        principal = self.backend.read_now(lambda s: authenticate_digest(s.db, digest))
        if principal is None or principal.roles.isdisjoint(READERS):
            return None
        return self.sessions.open(digest)

    # -- rendering ----------------------------------------------------------------------

    def render(self, request: Request, viewer: Viewer | None, rendered: Rendered) -> Response:
        """A template in the base layout: the navigation the viewer may see, its CSRF token."""
        nav = [
            (page.nav, page.path)
            for page in self.pages
            if page.nav is not None and viewer is not None and viewer.may(page.roles)
        ]
        context = {"viewer": viewer, "nav": nav, "current": request.url.path, **rendered.context}
        response = self.templates.TemplateResponse(
            request, rendered.template, context, status_code=rendered.status
        )
        response.headers.update(SECURITY_HEADERS)
        return response

    def error(self, request: Request, viewer: Viewer | None, code: str, detail: str) -> Response:
        return self.render(
            request,
            viewer,
            Rendered("error.html", {"code": code, "detail": detail}, status=status_of(code)),
        )

    # -- routes -------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        own: list[BaseRoute] = [
            Route("/", lambda request: see_other(HOME), methods=["GET"], name="consoleHome"),
            Route(SIGN_IN, self._sign_in_page, methods=["GET"], name="signInPage"),
            Route(SIGN_IN, self._sign_in, methods=["POST"], name="signIn"),
            Route("/sign-out", self._sign_out, methods=["POST"], name="signOut"),
            Route("/static/{name}", self.assets.serve, methods=["GET"], name="static"),
        ]
        pages = [
            Route(page.path, _page_endpoint(self, page), methods=list(page.methods), name=page.name)
            for page in self.pages
        ]
        return [*own, *pages]

    async def _sign_in_page(self, request: Request) -> Response:
        viewer = await run_in_threadpool(self.viewer_now, request)
        if viewer is not None:
            return see_other(HOME)
        return self.render(request, None, Rendered("sign_in.html", {"refused": False}))

    async def _sign_in(self, request: Request) -> Response:
        """Before any session exists, CSRF is the browser's word (`same_origin`): a forged
        sign-in would sign the victim in as the forger."""
        if not same_origin(request):
            return self.error(request, None, "CSRF_INVALID", "sign in from the console's page")
        try:
            form = await read_form(request)
        except LedgerError as refused:
            return self.error(request, None, refused.code, refused.detail)
        opened = await run_in_threadpool(self.sign_in_now, form.get("token", "").strip())
        if opened is None:
            return self.render(
                request, None, Rendered("sign_in.html", {"refused": True}, status=401)
            )
        session_id, _ = opened
        response = see_other(HOME)
        response.set_cookie(
            COOKIE,
            session_id,
            max_age=int(self.sessions.settings.max_seconds),
            path="/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def _sign_out(self, request: Request) -> Response:
        viewer = await run_in_threadpool(self.viewer_now, request)
        if viewer is None:
            return see_other(SIGN_IN)
        try:
            form = await read_form(request)
        except LedgerError as refused:
            return self.error(request, viewer, refused.code, refused.detail)
        if not csrf_valid(request, viewer, form):
            return self.error(request, viewer, "CSRF_INVALID", CSRF_DETAIL)
        self.sessions.close(request.cookies[COOKIE])
        response = see_other(SIGN_IN)
        response.delete_cookie(COOKIE, path="/")
        return response


CSRF_DETAIL = "the form is not one this session was given: reload the page and send it again"


def csrf_valid(request: Request, viewer: Viewer, form: Mapping[str, str]) -> bool:
    """A POST's CSRF check: the session's token in the form and the browser's same origin."""
    sent = form.get(CSRF_FIELD, "")
    return same_origin(request) and hmac.compare_digest(
        sent.encode("utf-8", "surrogatepass"), viewer.session.csrf_token.encode()
    )


def _page_endpoint(console: Console, page: Page) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        form: dict[str, str] = {}
        if request.method == "POST":
            try:
                form = await read_form(request)
            except LedgerError as refused:
                return console.error(request, None, refused.code, refused.detail)
        return await run_in_threadpool(_visit, console, page, request, form)

    return endpoint


def _visit(console: Console, page: Page, request: Request, form: dict[str, str]) -> Response:
    """On a worker thread: the session, the role, CSRF, then the page's handler."""
    viewer = console.viewer_now(request)
    if viewer is None:
        if request.method == "GET":
            return see_other(SIGN_IN)
        return console.error(request, None, "UNAUTHENTICATED", "sign in first")
    if not viewer.may(page.roles):
        needs = " or ".join(role for role in ROLES if role in page.roles)
        return console.error(request, viewer, "FORBIDDEN", f"this needs the role {needs}")
    if request.method == "POST" and not csrf_valid(request, viewer, form):
        return console.error(request, viewer, "CSRF_INVALID", CSRF_DETAIL)
    try:
        with acting_as(token_actor(viewer.principal.name, viewer.principal.roles, VIA_CONSOLE)):
            answer = page.handler(Visit(request, viewer, form, console.backend))
    except LedgerError as refused:
        return console.error(request, viewer, refused.code, refused.detail)
    except Exception:
        LOG.exception("unexpected error in the console's %s %s", request.method, page.path)
        return console.error(request, viewer, "INTERNAL_ERROR", "the server failed; see its log")
    if isinstance(answer, Rendered):
        return console.render(request, viewer, answer)
    return answer


def new_idempotency_key(action: str) -> str:
    """A form's idempotency key, drawn when it is shown, so that sending it twice is one write."""
    return f"console-{action}-{secrets.token_urlsafe(12)}"
