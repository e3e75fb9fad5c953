"""What the console's tests share (tests/test_console_*.py, and the tests of every page added
to it): a browser-like HTTP client signed in per role and a page's CSRF token; the system
Chromium launched for Playwright, signing in through the form, and the accessibility check.

In a test module of a page: `from console_support import chromium, page` (fixtures) gives
the module one browser (`chromium`: skipped, or failed under AIOS_REQUIRE_BROWSER=1, when
Chromium, axe-core or Playwright is missing) and each test a fresh context (`page`; a second
one: `second_page`); then `sign_in(page, server, role)`, and `accessible(page)` on every page
the test visits. `bulk_ledger(path)` puts a ledger of BULK tasks at `path` (written once per
session through the library, copied for each module).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import TaskCreateCommand
from aios_ledger.shell import Database
from aios_ledger.shell.tasks.ledger import TaskLedger
from api_server import Served

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
# A 1280-px window at 200 % zoom: 640 CSS px (WCAG 1.4.4 and 1.4.10: no horizontal scroll).
ZOOMED = {"width": 640, "height": 400}
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


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One browser for the module."""
    with launched_chromium() as browser:
        yield browser


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh context (its own cookies) and its page, per test."""
    with new_page(chromium) as opened:
        yield opened


@pytest.fixture
def second_page(chromium: Any) -> Iterator[Any]:
    """Another, for a test of two people at once."""
    with new_page(chromium) as opened:
        yield opened


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


# What the bulk ledger is made by: a change to any of them (the schema, a decision, a seal,
# this seeding) writes it anew.
BULK_SOURCES = ("core", "shell", "sql", "tests/console_support.py")


def _bulk_key() -> str:
    digest = hashlib.sha256(f"{BULK}/{BULK_BATCH}".encode())
    for part in BULK_SOURCES:
        root = ROOT / part
        for file in sorted([root] if root.is_file() else root.rglob("*")):
            if file.is_file() and file.suffix in (".py", ".sql"):
                digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:24]


@pytest.fixture(scope="session")
def bulk_template(request: pytest.FixtureRequest) -> Path:
    """A ledger of BULK tasks, written through the library (`bulk_tasks`: ~45 s here) once
    and kept in pytest's cache under the digest of the code and schema that wrote it, so that
    a later session (or the other xdist worker) copies it instead; stale it is never used.
    Without pytest's cache (`-p no:cacheprovider`) it is kept for the session's workers only."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        folder = Path(cache.mkdir("console-bulk"))
    else:  # `-p no:cacheprovider`: kept for this session's workers only, beside their temp dirs
        factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
        folder = factory.getbasetemp().parent / "console-bulk"
        folder.mkdir(exist_ok=True)
    template = folder / f"ledger-{_bulk_key()}.db"
    if not template.exists():
        scratch = folder / f"writing-{os.getpid()}-{secrets.token_hex(4)}"
        scratch.mkdir()
        try:
            bulk_tasks(scratch / "ledger.db")
            for leftover in scratch.glob("ledger.db-*"):  # closed: its WAL checkpointed
                assert leftover.stat().st_size == 0, leftover
            os.replace(scratch / "ledger.db", template)  # atomic: a reader sees all or none
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        for old in folder.glob("ledger-*.db"):
            if old != template:
                old.unlink(missing_ok=True)
    return template


def bulk_ledger(template: Path, path: Path) -> None:
    """A copy of the bulk ledger at `path`, for one module's server."""
    shutil.copyfile(template, path)


def sign_in(page: Any, server: Served, role: str) -> None:
    page.goto(f"{server.url}/tasks")
    assert page.url == f"{server.url}/sign-in"  # signed out: sent to sign in
    page.get_by_label("API token").fill(server.tokens[role])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.url}/tasks")


def accessible(page: Any) -> None:
    """No serious or critical axe-core violation on the page, nothing wider than a phone
    (375 px) or a 1280-px window at 200 % zoom (640 CSS px), and the page under
    MAX_PAGE_BYTES."""
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
    try:
        for width in (PHONE, ZOOMED):
            page.set_viewport_size(width)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width["width"], (page.url, width, wide)
    finally:
        page.set_viewport_size(size)


def browser(server: Served) -> httpx.Client:
    """A client without a bearer token, as a browser is: it keeps cookies, follows nothing."""
    return httpx.Client(base_url=server.url, timeout=60.0)


def signed_in(server: Served, role: str) -> httpx.Client:
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
