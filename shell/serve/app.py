"""The application `aios-ledger serve` runs: the core routes of `shell/api/app.py`'s
`operations()` plus the API's governed-write, review and checkpoint routes (`governed.py`,
`review_routes.py`, `checkpoint_routes.py` in `shell/api`), and the web console's pages under
`/` (`shell/web`), after every API route.

One function, used by `serve` and by the tests that check the whole served app (schemathesis), so
that no route is served untested and no test builds an app nobody serves."""

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
    """The routes `serve` adds to `operations()`."""
    return (*governed_operations(), *review_operations(), *checkpoint_operations())


def served_operations() -> tuple[Operation, ...]:
    """Every route `serve` answers, in the order of its document."""
    return (*operations(), *served_extras())


def served_app(settings: ApiSettings, sessions: SessionSettings | None = None) -> Starlette:
    """The app `serve` runs over `settings` (`app.state.backend.close()` closes it), with the
    console (`app.state.console`) whose sessions live as `sessions` says; while tracing is on,
    with the middleware that continues each request's `traceparent`."""
    app = create_app(settings, served_extras())
    console = Console(app.state.backend, sessions or SessionSettings(), console_pages())
    app.router.routes.extend(console.routes())
    app.state.console = console
    if tracing_enabled():
        app.add_middleware(TraceMiddleware)
    return app


def settle_startup_heap() -> None:
    """Collect once, then move every object alive now (the modules, the OpenAPI document and
    its validators, the routes, the stores) to the collector's permanent generation, which no
    collection walks again: `serve` calls it once its app is built. Without it each full
    collection walks the whole startup heap while holding the GIL, pausing every thread: under
    many agents that was the largest part of a heartbeat's tail latency (docs/benchmarks.md)."""
    gc.collect()
    gc.freeze()
