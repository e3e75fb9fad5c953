"""Part 10: the web console's pages at 100,000 tasks: each page's size and time to first byte,
signed in, against a real `aios-ledger serve` (uvicorn) on the ledger's file.

The ledger is built once, not timed, through `create_tasks` in transactions of 10,000 tasks
(the core's own decisions and sealed events, no HTTP); a few of them are then claimed, so that
the pages that show holders and heartbeats have some. An owner's token signs in through the
console's form. Each repetition GETs every page once, in turn: the time to first byte is from
sending the request to its status line and headers (httpx's streamed answer), the size the
body's bytes. Targets (issue 29): every page under 100 KB, first byte under 200 ms (median).

First paint: the system Chromium (`/usr/bin/chromium`, or AIOS_CHROMIUM) under Playwright,
signed in through the form, loads the Tasks page and a task's page once per repetition (a
fresh navigation each, the pages `no-store`, their stylesheet and scripts from the browser's
cache under their digest addresses) and reads the navigation's PerformancePaintTiming
`first-contentful-paint` (ms from the navigation's start, the server's time included). Target:
under 200 ms. Its baseline, in the same run: a one-line page served on loopback by a server of
the bench's own (no ledger), what this browser on this machine takes to paint anything. Each
navigation comes from a page of the same site (127.0.0.1: the one-line page, then the Tasks
page, then a task's), as a person's from one console page to the next does: it stays in one
renderer process. (The floor was a `data:` page until 2026-12-05: a navigation between it and
the console's is cross-site, a new renderer process each time, which added 35 to 100 ms to the
Tasks page's figure alone; see docs/benchmarks.md.) Without Playwright or Chromium these rows
are left out, and the run says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from .harness import Size, figure, free_port, sized, summary, wait_healthy

BUILD_BATCH = 10_000
CLAIMED = 20
MAX_BYTES = 100_000
MAX_FIRST_BYTE_MS = 200.0
MAX_FIRST_PAINT_MS = 200.0
# The baseline of the first paints, in the same run: a page of one line on loopback, answered at
# once, which this browser on this machine paints no sooner than it paints anything.
FLOOR = "a one-line page"
FLOOR_PAGE = b"<!doctype html><title>t</title><p>paint</p>"
CHROMIUM = Path(os.environ.get("AIOS_CHROMIUM", "/usr/bin/chromium"))
# As the browser tests launch it (tests/console_support.py): headless, kept off the network.
# Compared on 2026-12-05 (docs/benchmarks.md): without --disable-gpu the figures are the same
# (this machine has no GPU: Chromium composites in software either way), and `--headless` is
# what Playwright passes anyway (the new headless mode: the headed browser's renderer).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FIRST_PAINT = """() => new Promise((resolve) => {
  const found = () => performance.getEntriesByName("first-contentful-paint")[0];
  if (found()) { resolve(found().startTime); return; }
  new PerformanceObserver(() => { if (found()) resolve(found().startTime); })
    .observe({ type: "paint", buffered: true });
})"""


def build(path: Path, tasks: int) -> tuple[str, str]:
    """The ledger of `tasks` tasks; answers the owner's token and one task's id."""
    from aios_ledger.shell import Database, TaskLedger
    from aios_ledger.shell.api.tokens import issue_token

    with TaskLedger(path, synchronous="NORMAL") as ledger:
        for first in range(0, tasks, BUILD_BATCH):
            ledger.create_tasks(
                (
                    {
                        "goal": f"console goal {n}",
                        "instructions": "run",
                        "required_capabilities": [f"cap-{n % 7}"],
                        "priority": n % 3,
                    },
                    f"create-{n}",
                )
                for n in range(first, min(tasks, first + BUILD_BATCH))
            )
        claimed = ledger.claim_many(
            agent_id="bench-agent",
            capabilities=[f"cap-{n}" for n in range(7)],
            lease_seconds=3600,
            limit=min(CLAIMED, tasks),
        )
        task_id = str(claimed[-1]["task_id"])
    with Database(path) as db:
        token = str(issue_token(db, "bench-owner", ["owner"])["token"])
    return token, task_id


class Served:
    """`aios-ledger serve` on a free loopback port."""

    def __init__(self, path: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "aios_ledger.shell.cli"),
                *("--db", str(path), "--log-level", "ERROR"),
                *("serve", "--listen", f"127.0.0.1:{port}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_healthy(self.url, self.process)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure(client: httpx.Client, path: str) -> tuple[float, int]:
    """One GET: (ms to the first byte, the body's bytes); a page that is not 200 fails."""
    started = time.perf_counter()
    with client.stream("GET", path) as answer:
        first_byte = (time.perf_counter() - started) * 1000
        body = answer.read()
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path} answered {answer.status_code}: {body[:300]!r}")
    return first_byte, len(body)


class _OneLine(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(FLOOR_PAGE)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(FLOOR_PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def one_line_page() -> Iterator[str]:
    """The floor's page on a loopback port of its own: the console's site (127.0.0.1), so a
    navigation between it and a console page stays in one renderer process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OneLine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def first_paints(url: str, token: str, paths: dict[str, str], reps: int) -> dict[str, list[float]]:
    """Each page's first-contentful-paint (ms), `reps` navigations each, in the system
    Chromium signed in as `token`, in the order of `paths` (each reached from the one before
    it); empty when Playwright or Chromium is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("part 10: no Playwright: first paint not measured", file=sys.stderr)
        return {}
    if not CHROMIUM.exists():
        print(f"part 10: no Chromium at {CHROMIUM}: first paint not measured", file=sys.stderr)
        return {}
    paints: dict[str, list[float]] = {name: [] for name in paths}

    def address(path: str) -> str:
        return path if path.startswith("http") else f"{url}{path}"

    with sync_playwright() as playwright, signed_in_page(playwright, url, token) as page:
        for path in paths.values():  # once untimed, as the first bytes are
            page.goto(address(path))
        for _ in range(reps):
            for name, path in paths.items():
                page.goto(address(path))
                paints[name].append(float(page.evaluate(FIRST_PAINT)))
    return paints


@contextmanager
def signed_in_page(playwright: Any, url: str, token: str) -> Iterator[Any]:
    """A page of the system Chromium, launched as the browser tests launch it, signed in to
    the console at `url` through its form as `token`'s holder; the browser closed after."""
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        page.goto(f"{url}/sign-in")
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{url}/tasks")
        yield page
    finally:
        browser.close()


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    tasks = sized(size, full=100_000, quick=20_000, smoke=200)
    path = scratch / "console.db"
    token, task_id = build(path, tasks)
    pages = {
        "/tasks": "/tasks",
        "/tasks?search=": f"/tasks?search=console+goal+{tasks // 2}",
        "/tasks?agent=": "/tasks?agent=bench-agent",
        "/tasks/{id}": f"/tasks/{task_id}",
        "/repositories": "/repositories",
        "/agents": "/agents",
        "/log": "/log",
        "/health": "/health",
    }
    server = Served(path)
    try:
        with httpx.Client(base_url=server.url, timeout=120.0) as client:
            signed = client.post("/sign-in", data={"token": token})
            if signed.status_code != 303:
                raise RuntimeError(f"sign-in answered {signed.status_code}")
            for path_of in pages.values():  # once untimed: the server's first reads warm up
                measure(client, path_of)
            first_bytes: dict[str, list[float]] = {name: [] for name in pages}
            sizes: dict[str, list[float]] = {name: [] for name in pages}
            for _ in range(reps):
                for name, path_of in pages.items():
                    ms, size_bytes = measure(client, path_of)
                    first_bytes[name].append(ms)
                    sizes[name].append(size_bytes / 1000)
        with one_line_page() as floor_page:
            painted = {
                FLOOR: floor_page,
                **{name: pages[name] for name in ("/tasks", "/tasks/{id}")},
            }
            paints = first_paints(server.url, token, painted, reps)
    finally:
        server.stop()
    part = "10 console"
    rows = []
    for name in pages:
        first = summary(first_bytes[name])
        kilobytes = summary(sizes[name])
        rows.append(
            figure(
                part,
                f"GET {name} first byte",
                first,
                "ms",
                target=f"< {MAX_FIRST_BYTE_MS:g}",
                met=first["median"] < MAX_FIRST_BYTE_MS,
                note=f"{tasks:,} tasks, signed in",
            )
        )
        rows.append(
            figure(
                part,
                f"GET {name} size",
                kilobytes,
                "KB",
                target=f"< {MAX_BYTES // 1000}",
                met=kilobytes["max"] * 1000 < MAX_BYTES,
            )
        )
        if paints.get(name):
            paint = summary(paints[name])
            rows.append(
                figure(
                    part,
                    f"GET {name} first paint",
                    paint,
                    "ms",
                    target=f"< {MAX_FIRST_PAINT_MS:g}",
                    met=paint["median"] < MAX_FIRST_PAINT_MS,
                    note="Chromium, first-contentful-paint",
                )
            )
    if paints.get(FLOOR):
        rows.append(
            figure(
                part,
                f"{FLOOR} first paint",
                summary(paints[FLOOR]),
                "ms",
                note="the browser's floor: the baseline of the first paints",
            )
        )
    return rows
