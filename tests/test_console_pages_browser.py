"""The Repositories, Agents and tokens, Log and Health pages in the system Chromium (Playwright)
against a real `aios-ledger serve` on a seeded ledger (tests/console_seed.py): each page for
each role passes axe-core (no serious or critical violation) and scrolls no wider than a
phone; an auditor's only action is `verify`, whose progress the page's script follows to the
result; the other roles have none. Skipped without Chromium, axe-core or Playwright unless
AIOS_REQUIRE_BROWSER=1."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from api_server import ROLE_NAMES, Scenario, ServeProcess
from console_seed import LANDED_TASK, seed_ledger, seed_tasks
from console_support import (
    accessible,
    new_page,
    sign_in,
)

PAGES = ("/tasks", f"/tasks/{LANDED_TASK}", "/repositories", "/agents", "/log", "/health")
# What a button may be besides an action: signing out, the Tasks page's filters and the
# Repositories page's search.
NOT_ACTIONS = {"Sign out", "Apply", "Find"}


@pytest.fixture(scope="module")
def console(chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("pages-browser")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PROPOSALS_DIR_ENV, str(root / "proposals"))
        seed_ledger(root, root / "ledger.db")
        with ServeProcess(root / "ledger.db", role_tokens=True) as server:
            seed_tasks(server)
            yield server


@pytest.mark.parametrize("role", ["agent", "reviewer", "owner", "auditor"])
def test_each_page_is_accessible_to_each_role(page: Any, console: ServeProcess, role: str) -> None:
    sign_in(page, console, role)
    for path in PAGES:
        page.goto(f"{console.url}{path}")
        assert page.get_by_role("heading", level=1).count() == 1
        accessible(page)
        actions = set(page.get_by_role("button").all_inner_texts()) - NOT_ACTIONS
        expected = {"Run verify now"} if path == "/log" and role in ("owner", "auditor") else set()
        assert actions == expected, (path, actions)


def test_a_commit_found_from_the_form_links_to_its_task(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "reviewer")
    page.goto(f"{console.url}/repositories")
    page.locator('a[href^="/repositories?commit="]').first.click()  # a branch move's commit
    accessible(page)  # the commit's way back to its task, shown
    page.get_by_role("link", name=LANDED_TASK).first.click()
    page.wait_for_url(f"{console.url}/tasks/{LANDED_TASK}")


def test_an_auditor_runs_verify_and_the_page_follows_it(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "auditor")
    page.goto(f"{console.url}/log")
    page.get_by_role("button", name="Run verify now").click()
    page.wait_for_url(f"{console.url}/log")
    # The script polls the progress endpoint and reloads the page once the run is done.
    page.locator("#verify-run[data-running=false]").wait_for(timeout=60_000)
    assert page.locator("#verify-state").inner_text().startswith("INTACT")
    accessible(page)


def test_health_charts_have_their_tables(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "agent")
    page.goto(f"{console.url}/health")
    charts = page.get_by_role("img")
    assert charts.count() == 7
    label = charts.first.get_attribute("aria-label") or ""
    assert label.startswith("Queue depth at the end of each hour (estimated): 24 bars from")
    page.get_by_text("The figures as a table").first.click()
    assert page.get_by_role("table").first.is_visible()
    accessible(page)


def test_every_page_reads_at_200_percent_zoom_and_on_a_phone(
    chromium: Any, console: ServeProcess
) -> None:
    """A 1280-px window at 200 % zoom (device_scale_factor 2 on a 640-px viewport) and a phone:
    no page scrolls sideways (wide tables scroll inside their own region), sign-in too."""
    for viewport, scale in (({"width": 640, "height": 400}, 2), ({"width": 375, "height": 800}, 3)):
        context = chromium.new_context(viewport=viewport, device_scale_factor=scale)
        try:
            zoomed = context.new_page()
            zoomed.goto(f"{console.url}/sign-in")
            assert zoomed.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            sign_in(zoomed, console, "owner")
            for path in PAGES:
                zoomed.goto(f"{console.url}{path}")
                wide = zoomed.evaluate("document.documentElement.scrollWidth")
                assert wide <= viewport["width"], (path, viewport, wide)
        finally:
            context.close()


def test_a_tasks_result_reviewer_and_evidence_are_on_screen(
    page: Any, console: ServeProcess
) -> None:
    """Without a click: the result's first lines, the attempt's reviewer and verdict beside
    it, and the text its agent wrote into the attempt's run."""
    scene = Scenario(console)
    task_id, lease = scene.claimed()
    said = scene.agent.post(
        f"/v1/runs/{task_id}@1/events",
        json={"kind": "stdout", "payload": "all 12 tests pass", "lease_token": lease},
    )
    assert said.status_code == 201, said.text
    result = {"summary": "the widgets are improved", "changed": ["src/widgets.py"]}
    submitted = scene.agent.post(
        f"/v1/tasks/{task_id}/result",
        json={"lease_token": lease, "result": result, "idempotency_key": scene.key()},
    )
    assert submitted.status_code == 200, submitted.text
    judged = scene.reviewer.post(
        f"/v1/tasks/{task_id}/verification",
        json={"decision": "SUCCEEDED", "reason": "as asked", "idempotency_key": scene.key()},
    )
    assert judged.status_code == 200, judged.text
    sign_in(page, console, "auditor")
    page.goto(f"{console.url}/tasks/{task_id}")
    assert page.locator("#result-json").is_visible()
    assert page.get_by_text('"summary": "the widgets are improved"').is_visible()
    attempt = page.locator("#attempt-1")
    reviewer = attempt.locator(".reviewer")
    assert reviewer.is_visible() and reviewer.inner_text() == ROLE_NAMES["reviewer"]
    verdict = attempt.locator(".verdict")
    assert verdict.is_visible() and verdict.inner_text().startswith("SUCCEEDED: as asked")
    assert attempt.get_by_text("all 12 tests pass").is_visible()
    accessible(page)


def test_a_landed_governed_write_shows_its_attestation(page: Any, console: ServeProcess) -> None:
    sign_in(page, console, "auditor")
    page.goto(f"{console.url}/tasks/{LANDED_TASK}")
    writes = page.locator("#writes")
    assert "GOVERNED_WRITE_APPLIED" in writes.inner_text()
    attestation = writes.locator("tbody tr", has_text="GOVERNED_WRITE_APPLIED").locator("td").last
    text = attestation.inner_text()
    assert re.fullmatch(r"signed by key \S+; provenance \S+(; review \S+)?", text), text
    assert attestation.locator("code").count() >= 2  # the key id and the statement's digest
    accessible(page)


def test_every_page_follows_a_dark_system_scheme(chromium: Any, console: ServeProcess) -> None:
    """A system that asks for dark gets the dark scheme (no switch to find), and axe-core's
    contrast check passes in it too; a light one gets the light scheme."""
    for scheme, background in (("dark", "rgb(18, 18, 18)"), ("light", "rgb(255, 255, 255)")):
        context = chromium.new_context(color_scheme=scheme, bypass_csp=True)
        try:
            themed = context.new_page()
            themed.goto(f"{console.url}/sign-in")
            for path in ("/sign-in", *PAGES):
                if path != "/sign-in":
                    themed.goto(f"{console.url}{path}")
                shown = themed.evaluate("getComputedStyle(document.body).backgroundColor")
                assert shown == background, (scheme, path, shown)
                accessible(themed)
                if path == "/sign-in":
                    sign_in(themed, console, "owner")
        finally:
            context.close()


# Every control a keyboard must reach: links, buttons, fields, the summaries of <details>, the
# scrolling regions (tabindex=0), shown on the page.
FOCUSABLE = """() => Array.from(document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex="0"]'
  )).filter((element) => element.checkVisibility()).map((element, n) => {
    element.dataset.control = String(n);
    return n;
  })"""
FOCUSED = """() => {
  const element = document.activeElement;
  return element && element.dataset.control !== undefined
    ? [element.dataset.control, getComputedStyle(element).outlineStyle]
    : null;
}"""


def test_every_page_is_keyboard_navigable(chromium: Any, console: ServeProcess) -> None:
    """Tab alone reaches every control of each page, each with a visible focus ring, the first
    being the skip link, which moves the focus to the page's content; sign-in and an action
    (an owner's retry, from a task's page with its form) work from the keyboard alone."""
    from playwright.sync_api import expect

    cancelled = Scenario(console).cancelled()
    with new_page(chromium) as keyboard:
        keyboard.goto(f"{console.url}/sign-in")
        for _ in range(5):  # the skip link, the brand's link, the field
            keyboard.keyboard.press("Tab")
            if keyboard.evaluate("document.activeElement.id") == "token":
                break
        assert keyboard.evaluate("document.activeElement.id") == "token"
        keyboard.keyboard.type(console.tokens["owner"])
        keyboard.keyboard.press("Enter")
        keyboard.wait_for_url(f"{console.url}/tasks")
        for path in (*PAGES, f"/tasks/{cancelled}"):
            keyboard.goto(f"{console.url}{path}")
            controls = keyboard.evaluate(FOCUSABLE)
            keyboard.keyboard.press("Tab")
            assert keyboard.evaluate("document.activeElement.textContent") == "Skip to content"
            reached: dict[str, str] = {}
            for _ in range(len(controls) + 5):
                focused = keyboard.evaluate(FOCUSED)
                if focused is not None:
                    reached[focused[0]] = focused[1]
                keyboard.keyboard.press("Tab")
            assert set(reached) == {str(n) for n in controls}, path
            assert "none" not in reached.values(), path  # every focus shown
            keyboard.goto(f"{console.url}{path}")
            keyboard.keyboard.press("Tab")
            keyboard.keyboard.press("Enter")
            assert keyboard.evaluate("document.activeElement.id") == "main", path
        for _ in range(50):  # from the content on, to the retry's reason
            keyboard.keyboard.press("Tab")
            if keyboard.evaluate("document.activeElement.id") == "retry-reason":
                break
        keyboard.keyboard.type("needed after all")
        keyboard.keyboard.press("Tab")
        assert keyboard.evaluate("document.activeElement.textContent") == "Retry the task"
        keyboard.keyboard.press("Enter")
        expect(keyboard.locator("#task-status")).to_have_text("QUEUED")
