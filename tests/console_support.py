"""What the console's tests share (tests/test_console_*.py, and the tests of every page added
to it): a browser-like HTTP client signed in per role and a page's CSRF token; the system
Chromium launched for Playwright, signing in through the form, and the accessibility check.

In a test module of a page: a module-scoped fixture `with launched_chromium() as browser:
yield browser` gives the module one browser (skipped, or failed under AIOS_REQUIRE_BROWSER=1,
when Chromium, axe-core or Playwright is missing), a `page` fixture `with new_page(browser) as
page: yield page` a fresh context per test; then `sign_in(page, server, role)`, and
`accessible(page)` on every page the test visits. `bulk_tasks(path)` writes BULK tasks into a
served ledger through the library.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import TaskCreateCommand
from aios_ledger.shell import Database
from aios_ledger.shell.tasks.ledger import TaskLedger
from api_server import ApiServer

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("AIOS_CHROMIUM", "/usr/bin/chromium"))
AXE = ROOT / ".venv" / "node_modules" / "axe-core" / "axe.min.js"
# Without the background-networking flags Chromium keeps calling out to a closed network.
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BULK = 10_000
BULK_BATCH = 1_000
PHONE = {"width": 375, "height": 800}
MAX_PAGE_BYTES = 100_000


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (make setup)"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    if not AXE.exists():
        return f"no axe-core at {AXE} (make setup, with npm)"
    return None


def require_browser() -> None:
    """Skip (or fail, under AIOS_REQUIRE_BROWSER=1) when the browser tests cannot run here."""
    reason = missing_browser()
    if reason is not None:
        if os.environ.get("AIOS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"AIOS_REQUIRE_BROWSER=1: {reason}")
        pytest.skip(reason)


@contextlib.contextmanager
def launched_chromium() -> Iterator[Any]:
    """The system Chromium under Playwright, headless, with the flags that keep it off the
    network (for a module-scoped fixture: one browser per module)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def new_page(browser: Any) -> Iterator[Any]:
    """A page in a fresh context (its own cookies). The test injects axe-core as a script of
    its own, which the console's CSP would refuse: the context bypasses it."""
    context = browser.new_context(bypass_csp=True)
    try:
        yield context.new_page()
    finally:
        context.close()


def bulk_tasks(path: Path) -> None:
    """BULK tasks through the library in batches (one write each): every other one needs
    `cap-odd`, each goal numbered."""
    with Database(path) as db:
        ledger = TaskLedger(database=db)
        for start in range(0, BULK, BULK_BATCH):
            commands = [
                TaskCreateCommand.from_mapping(
                    {
                        "idempotency_key": f"bulk-{n}",
                        "task": {
                            "goal": f"bulk goal {n:05d}",
                            "instructions": "i",
                            "required_capabilities": ["cap-odd" if n % 2 else "cap-even"],
                        },
                    }
                )
                for n in range(start, start + BULK_BATCH)
            ]
            ledger.apply_all(commands)


def sign_in(page: Any, server: ApiServer, role: str) -> None:
    page.goto(f"{server.url}/tasks")
    assert page.url == f"{server.url}/sign-in"  # signed out: sent to sign in
    page.get_by_label("API token").fill(server.tokens[role])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.url}/tasks")


def accessible(page: Any) -> None:
    """No serious or critical axe-core violation on the page, at 375 px nothing wider, and
    the page under MAX_PAGE_BYTES."""
    assert len(page.content().encode()) < MAX_PAGE_BYTES
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    serious = [
        (violation["id"], [node["target"] for node in violation["nodes"]])
        for violation in result["violations"]
        if violation["impact"] in ("serious", "critical")
    ]
    assert serious == [], serious
    size = page.viewport_size
    page.set_viewport_size(PHONE)
    try:
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        page.set_viewport_size(size)


def browser(server: ApiServer) -> httpx.Client:
    """A client without a bearer token, as a browser is: it keeps cookies, follows nothing."""
    return httpx.Client(base_url=server.url, timeout=60.0)


def signed_in(server: ApiServer, role: str) -> httpx.Client:
    client = browser(server)
    answer = client.post("/sign-in", data={"token": server.tokens[role]})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/tasks"
    return client


def csrf_of(client: httpx.Client, path: str = "/tasks") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found is not None
    return found.group(1)
