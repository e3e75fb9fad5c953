"""The application `aios-ledger serve` runs: every API route, then the web console's pages.

`serve` and the tests of the whole served app build it with one function, so that no route is
served untested."""

from __future__ import annotations

import gc

from aios_ledger.shell.api.app import create_app, operations
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.checkpoint_routes import checkpoint_operations
from aios_ledger.shell.api.governed import governed_operations
from aios_ledger.shell.api.openapi import Operation
from aios_ledger.shell.api.review_routes import review_operations
from aios_ledger.shell.api.tracing import TraceMiddleware
from aios_ledger.shell.tracing import tracing_enabled
from aios_ledger.shell.web.console import Console
from aios_ledger.shell.web.pages import console_pages
from aios_ledger.shell.web.sessions import SessionSettings
from starlette.applications import Starlette


def served_extras() -> tuple[Operation, ...]:
    return (*governed_operations(), *review_operations(), *checkpoint_operations())


def served_operations() -> tuple[Operation, ...]:
    """Every route `serve` answers, in the order of its document."""
    return (*operations(), *served_extras())


def served_app(settings: ApiSettings, sessions: SessionSettings | None = None) -> Starlette:
    """The app `serve` runs over `settings`, with the console; `app.state.backend.close()`
    closes it."""
    app = create_app(settings, served_extras())
    console = Console(app.state.backend, sessions or SessionSettings(), console_pages())
    app.router.routes.extend(console.routes())
    app.state.console = console
    if tracing_enabled():
        app.add_middleware(TraceMiddleware)
    return app


def settle_startup_heap() -> None:
    """Move every object alive once the app is built to the collector's permanent generation,
    so that full collections stop walking the startup heap while holding the GIL."""
    gc.collect()
    gc.freeze()
