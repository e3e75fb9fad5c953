"""The console's pages, one module each: a module holds its `Page` rows in `PAGES` and its
handlers; its templates are in ../templates/. A new page is a new module here, listed in
`console_pages()` (the navigation shows the pages in this order)."""

from __future__ import annotations

from aios_ledger.shell.web.console import Page
from aios_ledger.shell.web.pages import agents, health, log, repositories, task, tasks


def console_pages() -> tuple[Page, ...]:
    """Every page and action the console serves."""
    return (
        *tasks.PAGES,
        *task.PAGES,
        *repositories.PAGES,
        *agents.PAGES,
        *log.PAGES,
        *health.PAGES,
    )
