"""`make screenshots`: every console page at desktop (1280x800) and phone (390x844) width, as
PNGs under docs/screenshots/ (docs/console.md shows them).

It seeds a ledger as the pages' tests do (tests/console_seed.py: a landed governed write, a
checkpoint, a revoked token, tasks in each state), starts `aios-ledger serve` on it, signs in as
the owner (who sees every action) in the system Chromium under Playwright, and captures each
page's first screen (not the whole scroll: the images stay small), in the light scheme."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV  # noqa: E402
from api_server import ServeProcess  # noqa: E402
from console_seed import LANDED_TASK, seed_ledger, seed_tasks  # noqa: E402
from console_support import CHROMIUM, LAUNCH_ARGS, missing_browser  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}


def pages(landed_commit: str, task_id: str) -> dict[str, str]:
    """Each screenshot's name and the path it shows."""
    return {
        "tasks": "/tasks",
        "task": f"/tasks/{task_id}",
        "repositories": f"/repositories?commit={landed_commit}",
        "agents": "/agents",
        "log": "/log",
        "health": "/health",
    }


def main() -> int:
    reason = missing_browser()
    if reason is not None:
        sys.stderr.write(f"make screenshots: {reason}\n")
        return 1
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aios-screenshots-") as scratch:
        root = Path(scratch)
        os.environ[PROPOSALS_DIR_ENV] = str(root / "proposals")
        landed = seed_ledger(root, root / "ledger.db")
        with (
            ServeProcess(root / "ledger.db", role_tokens=True) as server,
            sync_playwright() as play,
        ):
            seed_tasks(server)
            shown = pages(str(landed["new_oid"]), LANDED_TASK)
            browser = play.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            try:
                for width, (wide, high) in WIDTHS.items():
                    context = browser.new_context(
                        viewport={"width": wide, "height": high}, color_scheme="light"
                    )
                    page = context.new_page()
                    page.goto(f"{server.url}/sign-in")
                    page.screenshot(path=str(OUT / f"sign-in-{width}.png"))
                    page.get_by_label("API token").fill(server.tokens["owner"])
                    page.get_by_role("button", name="Sign in").click()
                    page.wait_for_url(f"{server.url}/tasks")
                    for name, path in shown.items():
                        page.goto(f"{server.url}{path}")
                        page.screenshot(path=str(OUT / f"{name}-{width}.png"))
                    context.close()
            finally:
                browser.close()
    for png in sorted(OUT.glob("*.png")):
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
