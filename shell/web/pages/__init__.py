"""The console's pages, one module each with its `Page` rows in `PAGES`; the navigation shows
them in the order of `console_pages()`."""

from __future__ import annotations

from aios_ledger.shell.web.console import Page
from aios_ledger.shell.web.pages import agents, health, log, repositories, task, tasks


def console_pages() -> tuple[Page, ...]:
    return (
        *tasks.PAGES,
        *task.PAGES,
        *repositories.PAGES,
        *agents.PAGES,
        *log.PAGES,
        *health.PAGES,
    )
