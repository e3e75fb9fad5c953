"""The console in a real browser: the system Chromium driven by Playwright, against a real
`aios-ledger serve` holding 10,000 tasks. Sign-in per role, a wrong token, filtering and paging,
a task's timeline, an auditor without actions, a forged form, logout; and on every page axe-core
(injected by the test) finds no serious or critical accessibility violation, and a phone's
375 px scroll no wider than the screen.

One browser for the module (`chromium`), one server (`console`), a fresh context per test (its
own cookies), from tests/console_support.py. Without Chromium, axe-core (`make setup` installs
it with npm) or Playwright the module skips, unless `AIOS_REQUIRE_BROWSER=1` (CI), where that
is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_server import Scenario, ServeProcess
from console_support import (
    BULK,
    accessible,
    bulk_ledger,
    sign_in,
)


@pytest.fixture(scope="module")
def console(
    chromium: Any, bulk_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    path = tmp_path_factory.mktemp("browser") / "ledger.db"
    bulk_ledger(bulk_template, path)
    with ServeProcess(path, role_tokens=True) as server:
        yield server


@pytest.mark.parametrize("role", ["agent", "reviewer", "owner", "auditor"])
def test_each_role_signs_in(page: Any, console: ServeProcess, role: str) -> None:
    sign_in(page, console, role)
    assert page.get_by_text(f"({role})").is_visible()
    accessible(page)


def test_a_wrong_token_is_refused(page: Any, console: ServeProcess) -> None:
    page.goto(f"{console.url}/sign-in")
    accessible(page)
    page.get_by_label("API token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text().startswith("That token was refused")
    accessible(page)
    page.goto(f"{console.url}/tasks")
    assert page.url == f"{console.url}/sign-in"


def test_filter_and_page_through_the_tasks(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "auditor")
    assert int(page.locator('.count[data-status="QUEUED"]').inner_text()) >= BULK
    page.get_by_label("Capability").fill("cap-odd")
    page.get_by_label("Status", exact=True).select_option("QUEUED")
    page.get_by_role("button", name="Apply").click()
    seen: list[str] = []
    for _ in range(3):
        goals = page.locator("table.tasks tbody tr td:nth-child(3)").all_inner_texts()
        assert len(goals) == 50
        seen += goals
        page.get_by_role("link", name="Next page").click()
    # Newest first, odd numbers only (cap-odd), each once, pages joined without a gap.
    assert seen == [f"bulk goal {n:05d}" for n in range(BULK - 1, BULK - 301, -2)]
    accessible(page)
    page.get_by_label("Capability").fill("")
    page.get_by_label("Task id or goal").fill("bulk goal 04242")
    page.get_by_role("button", name="Apply").click()
    assert page.locator("table.tasks tbody tr").count() == 1


def test_open_a_task_and_see_its_timeline(page: Any, console: ServeProcess) -> None:
    task_id = Scenario(console).submitted()
    sign_in(page, console, "reviewer")
    page.get_by_label("Task id or goal").fill(task_id)
    page.get_by_role("button", name="Apply").click()
    page.get_by_role("link", name=task_id).click()
    assert page.locator("#task-status").inner_text() == "SUBMITTED"
    events = page.locator("table.timeline tbody tr td:nth-child(2)").all_inner_texts()
    assert events == ["TASK_CREATED", "TASK_CLAIMED", "RESULT_SUBMITTED"]
    accessible(page)


def test_an_auditor_sees_no_action(page: Any, console: ServeProcess) -> None:
    task_id = Scenario(console).queued()
    sign_in(page, console, "auditor")
    page.goto(f"{console.url}/tasks/{task_id}")
    assert page.get_by_role("button", name="Cancel the task").count() == 0
    assert page.get_by_role("button").all_inner_texts() == ["Sign out"]


def test_a_forged_form_without_its_csrf_token_is_refused(page: Any, console: ServeProcess) -> None:
    scene = Scenario(console)
    task_id = scene.queued()
    sign_in(page, console, "owner")
    page.goto(f"{console.url}/tasks/{task_id}")
    accessible(page)
    page.evaluate("document.querySelector('.task-actions input[name=csrf_token]').remove()")
    page.get_by_label("Reason").fill("forged")
    page.get_by_role("button", name="Cancel the task").click()
    assert "CSRF_INVALID" in page.get_by_role("alert").inner_text()
    accessible(page)
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "QUEUED"
    page.goto(f"{console.url}/tasks/{task_id}")  # the form as given: it works
    page.get_by_label("Reason").fill("no longer needed")
    page.get_by_role("button", name="Cancel the task").click()
    assert page.locator("#task-status").inner_text() == "CANCELLED"


def test_logout_ends_the_session(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "owner")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{console.url}/sign-in")
    page.goto(f"{console.url}/tasks")
    assert page.url == f"{console.url}/sign-in"


def test_the_list_updates_live_within_its_filters(page: Any, console: ServeProcess) -> None:
    from playwright.sync_api import expect

    scene = Scenario(console)
    sign_in(page, console, "auditor")
    page.get_by_label("Capability").fill(scene.cap)
    page.get_by_role("button", name="Apply").click()
    assert page.get_by_text("No task matches.").is_visible()
    cancelled = page.locator('.count[data-status="CANCELLED"]')
    before = int(cancelled.inner_text())
    page.evaluate("window.notReloaded = true")
    other = Scenario(console).queued(goal="another capability's task")
    task_id = scene.queued(goal="a task the API created")
    row = page.locator("table.tasks tbody tr", has_text=task_id)
    expect(row).to_contain_text("QUEUED", timeout=15_000)  # appeared, without a reload
    assert page.locator("table.tasks tbody tr", has_text=other).count() == 0  # filtered out
    answer = scene.owner.post(
        f"/v1/tasks/{task_id}/cancel", json={"reason": "live", "idempotency_key": scene.key()}
    )
    assert answer.status_code == 200, answer.text
    expect(row).to_contain_text("CANCELLED", timeout=15_000)
    expect(cancelled).to_have_text(str(before + 1))
    expect(page.locator("#live-status")).to_contain_text("Updated live")
    assert page.evaluate("window.notReloaded") is True
    accessible(page)
