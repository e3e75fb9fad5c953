"""A task's page shows its evidence where a person reads it, over HTTP in process (the served
app through Starlette's test client, signed in with a session cookie as a browser is), on both
engines: the result's first lines as visible text (not in a closed disclosure); each attempt
with its holder, times, reviewer and verdict; each attempt's run events with their text,
escaped and cut, each a link to the whole event (`GET /v1/runs/{run_id}/events?after=N-1&
limit=1`, which the session's cookie reads); and the page under 100 KB however much an agent
wrote into its run."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.serve.app import served_app
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.web.task_record import RUN_EVENTS_SHOWN, RUN_TEXT_LIMIT, RUN_TEXT_SHOWN
from conftest import both_engines
from console_support import MAX_PAGE_BYTES
from starlette.testclient import TestClient
from test_tasks_support import Clock

pytest_generate_tests = both_engines

TASK = "t-evidence"
HOSTILE = "<script>alert('run')</script> & \"quoted\""
LONG_LINE = "x" * 5_000
RESULT = {"summary": "the widgets are improved", "notes": ["first <note>", "second"]}
TEXT_CELL = re.compile(r'<td class="run-text">(.*?)</td>', re.DOTALL)
# Elements that never close, so never enclose anything (html.parser reports no end for them).
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


class Ancestry(HTMLParser):
    """The open elements (tag and attributes) around the element of one id."""

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self.element_id = element_id
        self.open: list[tuple[str, dict[str, str | None]]] = []
        self.found: list[tuple[str, dict[str, str | None]]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if dict(attrs).get("id") == self.element_id and self.found is None:
            self.found = list(self.open)
        if tag not in VOID:
            self.open.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop()[0] == tag:
                break


def ancestors(page: str, element_id: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Ancestry(element_id)
    parser.feed(page)
    assert parser.found is not None, f"no element #{element_id}"
    return parser.found


def section(page: str, element_id: str) -> str:
    """The HTML of the <section> of that id."""
    found = re.search(rf'<section [^>]*id="{element_id}">(.*?)</section>', page, re.DOTALL)
    assert found is not None, element_id
    return found.group(1)


@dataclass
class Ledger:
    """The test's ledger and its stores, on one injected clock that each claim moves past the
    backoff of a verdict of rework."""

    target: Path | str
    tasks: TaskLedger
    runs: RunStore
    clock: Clock


@pytest.fixture
def ledger(ledger_target: Path | str) -> Iterator[Ledger]:
    clock = Clock()
    with Database(ledger_target) as db:
        tasks, runs = TaskLedger(database=db, clock=clock), RunStore(database=db, clock=clock)
        yield Ledger(ledger_target, tasks, runs, clock)


def console(target: Path | str) -> tuple[TestClient, Any]:
    """The served app over `target`, and a client signed in to its console as an auditor."""
    with Database(target) as db:
        token = issue_token(db, "auditor-1", ["auditor"])["token"]
    app = served_app(ApiSettings(db_path=str(target)))
    client = TestClient(app, base_url="http://console.test")
    signed = client.post("/sign-in", data={"token": token}, follow_redirects=False)
    assert signed.status_code == 303, signed.text
    return client, app


def attempt(
    ledger: Ledger,
    holder: str,
    payloads: list[Any],
    verdict: tuple[str, str, str | None],
) -> None:
    """One attempt of TASK: claimed by `holder`, its run given `payloads`, a result submitted
    and judged (decision, reason, reviewer)."""
    ledger.clock.advance(86_400)  # past any backoff
    claimed = ledger.tasks.claim(agent_id=holder, capabilities=[], lease_seconds=300, task_id=TASK)
    assert claimed is not None
    lease, number = str(claimed["lease_token"]), int(claimed["attempt"])
    for payload in payloads:
        ledger.runs.append_event(f"{TASK}@{number}", "stdout", payload, lease_token=lease)
    ledger.tasks.submit_result(TASK, lease_token=lease, result=RESULT, idempotency_key=f"s{number}")
    decision, reason, reviewer = verdict
    ledger.tasks.verify(
        TASK, decision=decision, reason=reason, idempotency_key=f"v{number}", reviewer=reviewer
    )


def two_attempts(ledger: Ledger) -> None:
    """Sent back for rework by one reviewer, then accepted by another."""
    ledger.tasks.create_task(
        {"task_id": TASK, "goal": "g", "instructions": "i"}, idempotency_key="c"
    )
    first = [HOSTILE, LONG_LINE, {"line": "error: <b>bold</b>"}, None]
    attempt(ledger, "agent-a", first, ("NEEDS_REWORK", "no <tests> yet", "rita"))
    attempt(ledger, "agent-b", ["all tests pass"], ("SUCCEEDED", "good", "sam"))


def test_the_results_first_lines_are_visible_text(
    ledger: Ledger,
) -> None:
    two_attempts(ledger)
    client, app = console(ledger.target)
    try:
        page = client.get(f"/tasks/{TASK}")
    finally:
        app.state.backend.close()
    assert page.status_code == 200, page.text
    around = ancestors(page.text, "result-json")
    assert [tag for tag, _ in around if tag == "details"] == []  # no click to read it
    shown = re.search(r'<pre [^>]*id="result-json"[^>]*>(.*?)</pre>', page.text, re.DOTALL)
    assert shown is not None
    assert html.unescape(shown.group(1)).splitlines()[:3] == [
        "{",
        '  "notes": [',
        '    "first <note>",',
    ]
    assert "&lt;note&gt;" in shown.group(1)
    assert f'<a href="/v1/tasks/{TASK}">the task as JSON</a>' in page.text


def test_each_attempt_shows_its_holder_reviewer_and_verdict(
    ledger: Ledger,
) -> None:
    two_attempts(ledger)
    client, app = console(ledger.target)
    try:
        page = client.get(f"/tasks/{TASK}").text
    finally:
        app.state.backend.close()
    first, second = section(page, "attempt-1"), section(page, "attempt-2")
    assert '<dd class="holder">agent-a</dd>' in first
    assert '<dd class="reviewer">rita</dd>' in first
    assert "<strong>NEEDS_REWORK</strong>: no &lt;tests&gt; yet" in first
    assert '<dd class="holder">agent-b</dd>' in second
    assert '<dd class="reviewer">sam</dd>' in second
    assert "<strong>SUCCEEDED</strong>: good" in second
    # Each attempt's run events are in its own section, with their text.
    assert "all tests pass" in second and "all tests pass" not in first
    assert "error: &lt;b&gt;bold&lt;/b&gt;" in first


def test_run_events_show_their_text_escaped_and_cut_with_a_link_to_the_whole(
    ledger: Ledger,
) -> None:
    two_attempts(ledger)
    client, app = console(ledger.target)
    try:
        page = client.get(f"/tasks/{TASK}").text
        first = section(page, "attempt-1")
        texts = [html.unescape(cell) for cell in TEXT_CELL.findall(first)]
        assert texts == [
            HOSTILE,
            "x" * RUN_TEXT_SHOWN + "…",
            '{"line": "error: <b>bold</b>"}',
            "",
        ]
        assert "<script>" not in page  # the page's own scripts are linked, never inline
        assert "&lt;script&gt;alert(&#39;run&#39;)&lt;/script&gt; &amp; &#34;quoted&#34;" in first
        run = quote(f"{TASK}@1")
        link = f'href="/v1/runs/{run}/events?after=1&amp;limit=1"'
        assert link in first  # the long line's, event 2
        whole = client.get(html.unescape(link.removeprefix('href="').rstrip('"')))
        assert whole.status_code == 200, whole.text  # read with the session's cookie
        assert [(event["seq"], event["payload"]) for event in whole.json()] == [(2, LONG_LINE)]
    finally:
        app.state.backend.close()


def test_an_agent_that_writes_long_texts_on_every_attempt_keeps_the_page_under_100_kb(
    ledger: Ledger,
) -> None:
    """Three attempts of RUN_EVENTS_SHOWN events each, every one a text the page escapes to
    five times its length: the texts take RUN_TEXT_LIMIT of the page, the latest attempt's
    last events first; the page stays under 100 KB, and every event keeps its link."""
    ledger.tasks.create_task(
        {"task_id": TASK, "goal": "g", "instructions": "i", "max_attempts": 3},
        idempotency_key="c",
    )
    texts = [f"{n:04d}" + "&" * 2_000 for n in range(RUN_EVENTS_SHOWN)]
    for number in (1, 2, 3):
        attempt(ledger, f"agent-{number}", texts, ("NEEDS_REWORK", "again", "rita"))
    client, app = console(ledger.target)
    try:
        page = client.get(f"/tasks/{TASK}")
    finally:
        app.state.backend.close()
    assert page.status_code == 200, page.text
    assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
    shown = [
        [cell for cell in TEXT_CELL.findall(section(page.text, f"attempt-{n}"))] for n in (1, 2, 3)
    ]
    assert [len(cells) for cells in shown] == [RUN_EVENTS_SHOWN] * 3
    spent = sum(len(cell.removesuffix("…").encode()) for cells in shown for cell in cells)
    assert RUN_TEXT_LIMIT - len("&amp;") < spent <= RUN_TEXT_LIMIT
    assert shown[2][-1] == "0049" + "&amp;" * (RUN_TEXT_SHOWN - 4) + "…"  # the latest in full
    assert shown[0][0] == "…"  # the first attempt's first event: no room left for its text
    assert page.text.count("&amp;limit=1") == 3 * RUN_EVENTS_SHOWN


def test_a_run_event_alone_is_a_page_of_the_runs_events(
    ledger: Ledger,
) -> None:
    """`GET /v1/runs/{run_id}/events?after=N`: the events after the N-th, `limit` of them; a
    negative `after` is refused and changes nothing."""
    two_attempts(ledger)
    assert [event.seq for event in ledger.runs.run_events(f"{TASK}@1", after=2)] == [3, 4]
    client, app = console(ledger.target)
    try:
        path = f"/v1/runs/{quote(TASK + '@1')}/events"
        assert [event["seq"] for event in client.get(path, params={"after": 1}).json()] == [
            2,
            3,
            4,
        ]
        assert client.get(path, params={"after": 4}).json() == []
        refused = client.get(path, params={"after": -1})
        assert refused.status_code == 422 and refused.json()["code"] == "FIELDS_INVALID"
        whole = client.get(path, params={"after": 0, "limit": 1}).json()
        assert json.dumps(whole[0]["payload"]) == json.dumps(HOSTILE)
    finally:
        app.state.backend.close()
