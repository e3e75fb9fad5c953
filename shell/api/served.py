"""The application `aios-ledger serve` runs: the core routes of `app.operations()` plus the
governed-write routes (`governed.py`), the review routes (`review_routes.py`) and the checkpoint
routes (`checkpoint_routes.py`).

One function, used by `serve` and by the tests that check the whole served app (schemathesis), so
that no route is served untested and no test builds an app nobody serves."""

from __future__ import annotations

from aios_ledger.shell.api.app import create_app, operations
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.checkpoint_routes import checkpoint_operations
from aios_ledger.shell.api.governed import governed_operations
from aios_ledger.shell.api.openapi import Operation
from aios_ledger.shell.api.review_routes import review_operations
from starlette.applications import Starlette


def served_extras() -> tuple[Operation, ...]:
    """The routes `serve` adds to `operations()`."""
    return (
        *governed_operations(),
        *review_operations(),
        *checkpoint_operations(),
    )


def served_operations() -> tuple[Operation, ...]:
    """Every route `serve` answers, in the order of its document."""
    return (*operations(), *served_extras())


def served_app(settings: ApiSettings) -> Starlette:
    """The app `serve` runs over `settings` (`app.state.backend.close()` closes it)."""
    return create_app(settings, served_extras())
