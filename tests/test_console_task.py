"""The task page whole, its actions by role and its live updates, against a real `aios-ledger
serve`: over HTTP (a form sent twice is one action, a refusal is the ledger's code, a forged
form is refused, the event stream reads with the session cookie and a write never does), and in
the system Chromium (Playwright): a governed task's timeline, diff and proofs in a real git
repository; a reviewer verifies, an owner performs the governed write and retries; the page
updates live from an event the API wrote; an auditor sees no action; axe-core on each page.
"""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from aios_ledger.core.git import ProposalRow
from aios_ledger.core.git.settings import MAX_SCAN_SECONDS
from aios_ledger.core.runs.evidence import MAX_EVENTS_PAGE
from aios_ledger.core.tasks.requests import MAX_ATTEMPTS, MAX_REASON
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.repos import change_repository_settings
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.web.pages.task import REASON_SHOWN
from aios_ledger.shell.web.task_record import (
    DIFF_CUT,
    DIFF_LIMIT,
    EVENTS_SHOWN,
    RUN_EVENTS_SHOWN,
    Proposal,
    fit_diffs,
)
from api_server import ApiServer, Scenario
from console_support import (
    MAX_PAGE_BYTES,
    accessible,
    csrf_of,
    sign_in,
    signed_in,
)
from git_support import (
    REPOSITORY,
    binding,
    claim,
    edit,
    governed_task,
    make_repository,
    propose,
    ref,
    register,
    runtime_result,
    workspace,
)

KEY = re.compile(r'name="idempotency_key" value="([^"]+)"')
DIGEST = re.compile(r'name="expected_result_digest" value="([^"]+)"')
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
SEAL = re.compile(r"<summary>Event (\d+) ")
EARLIER = re.compile(r'<a rel="prev" href="([^"]+)">Earlier events</a>')
RESULT_SHOWN = re.compile(r'<pre [^>]*id="result-json"[^>]*>(.*?)</pre>', re.DOTALL)
CHANGED = {"src/widgets.py": "def widget() -> str:\n    return 'improved'\n"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    path = tmp_path_factory.mktemp("console-task") / "ledger.db"
    with ApiServer(path, role_tokens=True) as served:
        yield served


@pytest.fixture(scope="module")
def repository(server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real bare repository registered with the served ledger, and its base commit."""
    bare, base = make_repository(tmp_path_factory.mktemp("repo"))
    register(server.db, bare)
    # The secret scan's budget is seconds of the real clock; these pages are not about it, and
    # a loaded machine can take a large diff's scan past the default.
    with Database(server.db) as db:
        change_repository_settings(
            db, REPOSITORY, {"scan_max_seconds": MAX_SCAN_SECONDS}, idempotency_key="unhurried"
        )
    return bare, base


@pytest.fixture
def scene(server: ApiServer) -> Scenario:
    return Scenario(server)


def submitted_proposal(
    server: ApiServer, repository: tuple[Path, str], changed: dict[str, str] = CHANGED
) -> tuple[str, str]:
    """A governed task whose agent proposed `changed` in the repository and submitted its
    result (not yet verified): its id and the proposal's head commit."""
    task_id = "governed-" + secrets.token_hex(4)
    _, base = repository
    governed_task(server.db, task_id, binding(task_id, base))
    claimed = claim(server.db, task_id)
    space = workspace(server.db, claimed)
    try:
        edit(space, changed)
        proposal = propose(server.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    ledger = TaskLedger(server.db)
    try:
        ledger.submit_result(
            task_id,
            lease_token=str(claimed["lease_token"]),
            result=runtime_result(claimed, sorted(changed)),
            idempotency_key=f"submit-{task_id}",
        )
    finally:
        ledger.close()
    return task_id, str(proposal["head_oid"])


def form_of(client: httpx.Client, task_id: str) -> dict[str, str]:
    """The first action form's CSRF token and idempotency key, as the page gave them."""
    page = client.get(f"/tasks/{task_id}")
    key = KEY.search(page.text)
    assert key is not None, page.text
    return {"csrf_token": csrf_of(client, f"/tasks/{task_id}"), "idempotency_key": key.group(1)}


def events_of(scene: Scenario, task_id: str) -> list[str]:
    answer = scene.owner.get(f"/v1/tasks/{task_id}/events")
    return [event["event_type"] for event in answer.json()]


# -- over HTTP --------------------------------------------------------------------------------


def test_a_verify_form_sent_twice_is_one_verification(server: ApiServer, scene: Scenario) -> None:
    task_id = scene.submitted()
    reviewer = signed_in(server, "reviewer")
    page = reviewer.get(f"/tasks/{task_id}")
    digest = DIGEST.search(page.text)
    assert digest is not None
    form = {
        **form_of(reviewer, task_id),
        "decision": "SUCCEEDED",
        "reason": "checked by hand",
        "expected_result_digest": digest.group(1),
    }
    for _ in range(2):
        answer = reviewer.post(f"/tasks/{task_id}/verification", data=form, headers=SAME_ORIGIN)
        assert (answer.status_code, answer.headers["location"]) == (303, f"/tasks/{task_id}")
    assert events_of(scene, task_id).count("TASK_VERIFIED") == 1
    task = scene.owner.get(f"/v1/tasks/{task_id}").json()
    assert task["status"] == "SUCCEEDED"
    history = scene.owner.get(f"/v1/tasks/{task_id}/history").json()
    assert (history[-1]["decision"], history[-1]["reason"]) == ("SUCCEEDED", "checked by hand")


def test_cancel_and_retry_forms_are_the_apis_actions_under_the_forms_key(
    server: ApiServer, scene: Scenario
) -> None:
    """Each form sent twice is one action, and the API given the form's key answers that same
    action (one idempotency store): the same key with other fields is the API's conflict."""
    task_id = scene.queued()
    owner = signed_in(server, "owner")
    for action, reason, event in (
        ("cancel", "not now", "TASK_CANCELLED"),
        ("retry", "needed after all", "TASK_REQUEUED"),
    ):
        form = {**form_of(owner, task_id), "reason": reason}
        for _ in range(2):
            answer = owner.post(f"/tasks/{task_id}/{action}", data=form, headers=SAME_ORIGIN)
            assert (answer.status_code, answer.headers["location"]) == (303, f"/tasks/{task_id}")
        assert events_of(scene, task_id).count(event) == 1, action
        body = {"reason": reason, "idempotency_key": form["idempotency_key"]}
        replayed = scene.owner.post(f"/v1/tasks/{task_id}/{action}", json=body)
        assert replayed.status_code == 200, replayed.text
        conflict = owner.post(
            f"/tasks/{task_id}/{action}", data={**form, "reason": "other"}, headers=SAME_ORIGIN
        )
        assert conflict.status_code == 409 and "IDEMPOTENCY_CONFLICT" in conflict.text, action
    assert events_of(scene, task_id).count("TASK_CANCELLED") == 1
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "QUEUED"


def test_a_governed_write_form_sent_twice_moves_the_branch_once(
    server: ApiServer, repository: tuple[Path, str], scene: Scenario
) -> None:
    task_id, head = submitted_proposal(server, repository)
    bare, _ = repository
    task = scene.owner.get(f"/v1/tasks/{task_id}").json()
    verified = scene.reviewer.post(
        f"/v1/tasks/{task_id}/verification",
        json={
            "decision": "SUCCEEDED",
            "reason": "r",
            "expected_result_digest": task["result_digest"],
            "idempotency_key": scene.key(),
        },
    )
    assert verified.status_code == 200, verified.text
    owner = signed_in(server, "owner")
    form = form_of(owner, task_id)
    for _ in range(2):
        answer = owner.post(f"/tasks/{task_id}/governed-write", data=form, headers=SAME_ORIGIN)
        assert (answer.status_code, answer.headers["location"]) == (303, f"/tasks/{task_id}")
    assert events_of(scene, task_id).count("GOVERNED_WRITE_APPLIED") == 1
    assert ref(bare, f"refs/heads/agent/{task_id}") == head
    replayed = scene.owner.post(
        f"/v1/tasks/{task_id}/governed-write", json={"idempotency_key": form["idempotency_key"]}
    )
    assert replayed.status_code == 200, replayed.text
    assert events_of(scene, task_id).count("GOVERNED_WRITE_APPLIED") == 1


def test_a_refusal_shows_the_ledgers_code_and_changes_nothing(
    server: ApiServer, scene: Scenario
) -> None:
    task_id = scene.submitted()
    wrong = "0" * 64
    reviewer = signed_in(server, "reviewer")
    form = {
        **form_of(reviewer, task_id),
        "decision": "SUCCEEDED",
        "reason": "r",
        "expected_result_digest": wrong,
    }
    page = reviewer.post(f"/tasks/{task_id}/verification", data=form, headers=SAME_ORIGIN)
    api = scene.reviewer.post(
        f"/v1/tasks/{task_id}/verification",
        json={
            "decision": "SUCCEEDED",
            "reason": "r",
            "expected_result_digest": wrong,
            "idempotency_key": scene.key(),
        },
    )
    code = api.json()["code"]
    assert page.status_code == api.status_code >= 400
    assert code in page.text and api.json()["detail"] in page.text
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "SUBMITTED"


def test_each_action_is_its_roles_alone(server: ApiServer, scene: Scenario) -> None:
    submitted, cancelled = scene.submitted(), scene.cancelled()
    owner, reviewer = signed_in(server, "owner"), signed_in(server, "reviewer")
    assert "/verification" not in owner.get(f"/tasks/{submitted}").text
    assert "/verification" in reviewer.get(f"/tasks/{submitted}").text
    assert "/retry" in owner.get(f"/tasks/{cancelled}").text
    assert "/retry" not in reviewer.get(f"/tasks/{cancelled}").text
    answer = reviewer.post(
        f"/tasks/{cancelled}/retry",
        data={"csrf_token": csrf_of(reviewer), "reason": "r", "idempotency_key": "k-reviewer"},
        headers=SAME_ORIGIN,
    )
    assert answer.status_code == 403 and "FORBIDDEN" in answer.text
    auditor = signed_in(server, "auditor")
    for action in ("verification", "retry", "cancel", "governed-write"):
        refused = auditor.post(
            f"/tasks/{submitted}/{action}",
            data={"csrf_token": csrf_of(auditor), "reason": "r", "idempotency_key": "k-a"},
            headers=SAME_ORIGIN,
        )
        assert refused.status_code == 403 and "FORBIDDEN" in refused.text, action
    assert scene.owner.get(f"/v1/tasks/{cancelled}").json()["status"] == "CANCELLED"


def test_a_forged_retry_without_its_csrf_token_is_refused(
    server: ApiServer, scene: Scenario
) -> None:
    task_id = scene.cancelled()
    owner = signed_in(server, "owner")
    form = {**form_of(owner, task_id), "reason": "again"}
    del form["csrf_token"]
    answer = owner.post(f"/tasks/{task_id}/retry", data=form, headers=SAME_ORIGIN)
    assert answer.status_code == 403 and "CSRF_INVALID" in answer.text
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "CANCELLED"


def test_the_stream_reads_with_the_session_and_a_write_never_does(
    server: ApiServer, scene: Scenario
) -> None:
    task_id = scene.queued()
    auditor = signed_in(server, "auditor")
    with auditor.stream("GET", f"/v1/events/stream?task_id={task_id}&after=0") as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        first = next(line for line in lines if line.startswith("event:"))
    assert first == "event: TASK_CREATED"
    owner = signed_in(server, "owner")
    write = owner.post(
        f"/v1/tasks/{task_id}/cancel", json={"reason": "r", "idempotency_key": "k-cookie"}
    )
    assert write.status_code == 401
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "QUEUED"
    assert httpx.get(f"{server.url}/v1/events/stream", timeout=10).status_code == 401


def test_a_long_lived_tasks_page_shows_its_latest_events_and_pages_back_under_100_kb(
    server: ApiServer, scene: Scenario
) -> None:
    """A task that heartbeat 200 times, its run holding more events than the page shows: each
    window of its events (every one with its seal and proof) is under 100 KB, and "Earlier
    events" pages back through every event once, in order; the run's last events are shown,
    all of them a link away."""
    task_id, lease = scene.claimed()
    run_id = f"{task_id}@1"
    run_events = RUN_EVENTS_SHOWN + 20
    for n in range(run_events):
        appended = scene.agent.post(
            f"/v1/runs/{run_id}/events",
            json={"kind": "stderr", "payload": {"n": n}, "lease_token": lease},
        )
        assert appended.status_code == 201, appended.text
    ledger = TaskLedger(server.db)
    try:
        for _ in range(200):
            ledger.heartbeat(task_id, lease_token=lease, lease_seconds=300)
    finally:
        ledger.close()
    wanted = [event["event_id"] for event in scene.owner.get(f"/v1/tasks/{task_id}/events").json()]
    client = signed_in(server, "auditor")
    seen: list[int] = []
    path: str | None = f"/tasks/{task_id}"
    while path is not None:
        page = client.get(path)
        assert page.status_code == 200, page.text
        assert len(page.content) < MAX_PAGE_BYTES, (path, len(page.content))
        shown = [int(n) for n in SEAL.findall(page.text)]
        assert 0 < len(shown) <= EVENTS_SHOWN and shown == sorted(shown)
        assert page.text.count("<td>TASK_HEARTBEAT</td>") <= len(shown)
        assert ("Latest events" in page.text) == bool(seen)  # on every page but the latest
        seen = shown + seen
        earlier = EARLIER.search(page.text)
        path = html.unescape(earlier.group(1)) if earlier else None
    assert seen == wanted
    latest = client.get(f"/tasks/{task_id}").text
    assert f"{run_events} events, the last {RUN_EVENTS_SHOWN} shown" in latest
    link = f"/v1/runs/{quote(run_id)}/events"
    assert f'href="{link}"' in latest
    assert len(client.get(link).json()) == run_events  # read with the session's cookie
    refused = client.get(f"/tasks/{task_id}", params={"before": "x"})
    assert refused.status_code == 422 and "FIELDS_INVALID" in refused.text


def test_a_window_before_the_tasks_first_event_links_back_to_the_latest(
    server: ApiServer, scene: Scenario
) -> None:
    """`?before=` at or below the task's first event (an old link, a typed address) shows no
    event: the page says so and links to the latest events, as any older window does."""
    task_id = scene.queued()
    client = signed_in(server, "auditor")
    for before in ("0", "1"):
        page = client.get(f"/tasks/{task_id}", params={"before": before})
        assert page.status_code == 200, page.text
        assert SEAL.findall(page.text) == []
        assert f'<a href="/tasks/{task_id}">Latest events</a>' in page.text


def test_a_run_longer_than_one_read_of_its_events_shows_its_last_ones(
    server: ApiServer, scene: Scenario
) -> None:
    """An evidence run of more events than one read of them returns (MAX_EVENTS_PAGE): the
    page counts them all and shows the run's last events, not the end of its first page."""
    task_id, lease = scene.claimed()
    run_id = f"{task_id}@1"
    total = MAX_EVENTS_PAGE + 5
    database = Database(server.db, synchronous="NORMAL")
    try:
        runs = RunStore(database=database)
        for n in range(total):
            runs.append_event(run_id, "stderr", {"n": n}, lease_token=lease)
    finally:
        database.close()
    page = signed_in(server, "auditor").get(f"/tasks/{task_id}")
    assert page.status_code == 200, page.text
    assert f"{total} events, the last {RUN_EVENTS_SHOWN} shown" in page.text
    seqs = [int(seq) for seq in re.findall(r"<tr><td>(\d+)</td><td>stderr</td>", page.text)]
    assert seqs == list(range(total - RUN_EVENTS_SHOWN + 1, total + 1))


def test_a_large_diff_is_cut_to_fit_the_page(
    server: ApiServer, repository: tuple[Path, str], scene: Scenario
) -> None:
    """A change whose diff is far past DIFF_LIMIT, of lines the page escapes (`<`, `&`, `"`):
    its first lines are shown (git's output cut, never refused), the page stays under 100 KB
    and says the whole change is the bundle."""
    lines = [f'if a{n} < b && c > "d": pass' for n in range(6000)]
    task_id, _ = submitted_proposal(server, repository, {"src/big.py": "\n".join(lines) + "\n"})
    page = signed_in(server, "auditor").get(f"/tasks/{task_id}")
    assert page.status_code == 200, page.text
    assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
    assert DIFF_CUT.replace("'", "&#39;") in page.text
    diff = re.search(r'<pre class="diff">(.*?)</pre>', page.text, re.DOTALL)
    assert diff is not None
    shown = re.findall(r"<span class=\"add\">\+(.*?)</span>", diff.group(1))
    assert 100 < len(shown) < len(lines)
    assert [html.unescape(line) for line in shown] == lines[: len(shown)]


def test_long_reasons_are_shown_cut_with_the_whole_a_link_away(
    server: ApiServer, scene: Scenario
) -> None:
    """An agent that releases its task again and again, each time with a reason of the most
    characters the page escapes: the timeline shows each reason's start, the page stays under
    100 KB, and the whole reasons are the history's JSON."""
    reason = "&" * MAX_REASON
    task_id = scene.queued(max_attempts=MAX_ATTEMPTS)
    ledger = TaskLedger(server.db)
    try:
        for _ in range(EVENTS_SHOWN):
            claimed = ledger.claim(
                agent_id="agent-x", capabilities=[scene.cap], lease_seconds=300, task_id=task_id
            )
            assert claimed is not None
            ledger.release(task_id, lease_token=str(claimed["lease_token"]), reason=reason)
    finally:
        ledger.close()
    client = signed_in(server, "auditor")
    page = client.get(f"/tasks/{task_id}")
    assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
    cut = "&amp;" * REASON_SHOWN
    assert f"<td>{cut[: -len('&amp;')]}…</td>" in page.text and cut + "&amp;" not in page.text
    link = f'<a href="/v1/tasks/{task_id}/history">the timeline as JSON</a>'
    assert link in page.text
    history = client.get(f"/v1/tasks/{task_id}/history").json()
    assert [entry["reason"] for entry in history].count(reason) == EVENTS_SHOWN


def test_a_large_result_is_shown_cut_with_the_whole_a_link_away(
    server: ApiServer, scene: Scenario
) -> None:
    task_id, lease = scene.claimed()
    lines = [f"line {n} <&>" for n in range(20_000)]
    answer = scene.agent.post(
        f"/v1/tasks/{task_id}/result",
        json={"lease_token": lease, "result": {"lines": lines}, "idempotency_key": scene.key()},
    )
    assert answer.status_code == 200, answer.text
    client = signed_in(server, "reviewer")
    page = client.get(f"/tasks/{task_id}")
    assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
    shown = RESULT_SHOWN.search(page.text)
    assert shown is not None
    first = html.unescape(shown.group(1)).splitlines()
    assert first[:3] == ["{", '  "lines": [', '    "line 0 <&>",'] and 100 < len(first) < len(lines)
    link = f'<a href="/v1/tasks/{task_id}">the task as JSON</a>'
    assert link in page.text
    assert client.get(f"/v1/tasks/{task_id}").json()["result"]["lines"] == lines


def test_a_result_of_one_long_line_shows_its_start(server: ApiServer, scene: Scenario) -> None:
    """A result whose text is one JSON line past the page's limit (an agent's whole log in
    one string: its newlines are escapes) shows that line's start, not `{` alone."""
    task_id, lease = scene.claimed()
    log = "step <&> done\n" * 5_000
    answer = scene.agent.post(
        f"/v1/tasks/{task_id}/result",
        json={"lease_token": lease, "result": {"log": log}, "idempotency_key": scene.key()},
    )
    assert answer.status_code == 200, answer.text
    page = signed_in(server, "reviewer").get(f"/tasks/{task_id}")
    assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
    shown = RESULT_SHOWN.search(page.text)
    assert shown is not None
    first = html.unescape(shown.group(1)).splitlines()
    assert first[0] == "{" and first[1].startswith('  "log": "step <&> done\\nstep <&> done')
    assert 100 < len(first[1]) < len(log)
    assert f'<a href="/v1/tasks/{task_id}">the task as JSON</a>' in page.text


def test_the_newest_proposals_diff_comes_first_within_the_limit() -> None:
    def proposal(attempt: int, diff: str) -> Proposal:
        row = ProposalRow(
            f"p{attempt}", "t", attempt, "r", "a", "0" * 40, "1" * 40, "2" * 64, 1, "{}", "[]",
            "{}", "2026-01-01T00:00:00Z",
        )  # fmt: skip
        return Proposal(row, [], {}, diff, None)

    small, large = "+x\n" * 10, "+<&>\n" * DIFF_LIMIT
    older, newer = fit_diffs([proposal(1, large), proposal(2, small)])
    assert (newer.diff, newer.diff_note) == (small, None)  # whole: the newest, first
    assert older.diff_note == DIFF_CUT and older.diff is not None
    assert 0 < len(older.diff.splitlines()) < DIFF_LIMIT
    older, newer = fit_diffs([proposal(1, small), proposal(2, large)])
    assert newer.diff_note == DIFF_CUT
    assert (older.diff, older.diff_note) == (None, DIFF_CUT)  # nothing of the page was left


def test_a_repository_filter_reads_its_proposals_tasks(
    server: ApiServer, repository: tuple[Path, str], scene: Scenario
) -> None:
    """The repository filter (0025's task_proposals_by_repository_task, a few tasks: read
    through it and sorted) finds the tasks whose proposals name the repository, newest first."""
    first, _ = submitted_proposal(server, repository)
    second, _ = submitted_proposal(server, repository)
    scene.queued()  # no proposal: not listed
    answer = scene.owner.get("/v1/tasks", params={"repository": REPOSITORY, "limit": 1})
    page = answer.json()
    rest = scene.owner.get(
        "/v1/tasks", params={"repository": REPOSITORY, "cursor": page["next_cursor"]}
    ).json()
    listed = [task["task_id"] for task in page["tasks"] + rest["tasks"]]
    assert listed[:2] == [second, first] and len(listed) == len(set(listed))
    assert rest["next_cursor"] is None


# -- in the browser ---------------------------------------------------------------------------


def test_verify_then_write_a_governed_proposal_from_the_page(
    page: Any, second_page: Any, server: ApiServer, repository: tuple[Path, str]
) -> None:
    from playwright.sync_api import expect

    task_id, head = submitted_proposal(server, repository)
    bare, _ = repository
    sign_in(page, server, "reviewer")
    page.goto(f"{server.url}/tasks/{task_id}")
    assert page.locator("#task-status").inner_text() == "SUBMITTED"
    timeline = page.locator("table.timeline tbody tr td:nth-child(2)").all_inner_texts()
    assert timeline[0] == "TASK_CREATED" and timeline[-1] == "RESULT_SUBMITTED"
    assert page.locator("ul.changed-files").inner_text() == "src/widgets.py"
    assert "+    return 'improved'" in page.locator("pre.diff").inner_text()
    assert page.locator("pre.diff .add").count() >= 2
    seals = page.locator("ol.seals > li")
    assert seals.count() == len(timeline)  # every event of the timeline, with its seal
    seals.first.locator("summary").click()
    assert "Audit path" in seals.first.inner_text()
    accessible(page)
    page.get_by_label("Decision").select_option("SUCCEEDED")
    page.get_by_label("Reason").fill("the diff does what the goal asks")
    page.get_by_role("button", name="Verify the result").click()
    expect(page.locator("#task-status")).to_have_text("SUCCEEDED")
    assert page.get_by_role("button", name="Verify the result").count() == 0

    sign_in(second_page, server, "owner")
    second_page.goto(f"{server.url}/tasks/{task_id}")
    second_page.get_by_role("button", name="Write the proposal to its branch").click()
    expect(second_page.locator("#writes")).to_contain_text("GOVERNED_WRITE_APPLIED")
    assert ref(bare, f"refs/heads/agent/{task_id}") == head
    assert second_page.get_by_role("button", name="Write the proposal to its branch").count() == 0
    accessible(second_page)


def test_retry_from_the_page(page: Any, server: ApiServer, scene: Scenario) -> None:
    from playwright.sync_api import expect

    task_id = scene.cancelled()
    sign_in(page, server, "owner")
    page.goto(f"{server.url}/tasks/{task_id}")
    page.get_by_label("Reason").fill("it is needed after all")
    page.get_by_role("button", name="Retry the task").click()
    expect(page.locator("#task-status")).to_have_text("QUEUED")
    assert events_of(scene, task_id)[-1] == "TASK_REQUEUED"


def test_the_page_updates_live_from_an_event_the_api_wrote(
    page: Any, server: ApiServer, scene: Scenario
) -> None:
    from playwright.sync_api import expect

    task_id = scene.queued()
    sign_in(page, server, "auditor")
    page.goto(f"{server.url}/tasks/{task_id}")
    assert page.get_by_role("button").all_inner_texts() == ["Sign out"]  # an auditor reads
    accessible(page)
    page.evaluate("window.notReloaded = true")
    answer = scene.owner.post(
        f"/v1/tasks/{task_id}/cancel", json={"reason": "from the API", "idempotency_key": "k-l"}
    )
    assert answer.status_code == 200, answer.text
    expect(page.locator("#task-status")).to_have_text("CANCELLED", timeout=15_000)
    expect(page.locator("#live-status")).to_contain_text("TASK_CANCELLED")
    assert page.evaluate("window.notReloaded") is True  # updated in place, not reloaded
    assert page.locator("table.timeline tbody tr").last.inner_text().count("from the API") == 1


def test_a_live_update_waits_while_a_field_is_filled_in(
    page: Any, server: ApiServer, scene: Scenario
) -> None:
    """An event comes while the reviewer types a reason: the page says so and keeps what is
    typed; once focus leaves the field the record is put in place, still without a reload."""
    from playwright.sync_api import expect

    task_id = scene.submitted()
    sign_in(page, server, "reviewer")
    page.goto(f"{server.url}/tasks/{task_id}")
    page.evaluate("window.notReloaded = true")
    reason = page.get_by_label("Reason")
    reason.fill("half a thought")  # the field keeps the focus
    answer = scene.owner.post(
        f"/v1/tasks/{task_id}/cancel", json={"reason": "meanwhile", "idempotency_key": scene.key()}
    )
    assert answer.status_code == 200, answer.text
    expect(page.locator("#live-status")).to_contain_text("once you leave the field", timeout=15_000)
    assert reason.input_value() == "half a thought"
    assert page.locator("#task-status").inner_text() == "SUBMITTED"
    reason.blur()
    expect(page.locator("#task-status")).to_have_text("CANCELLED", timeout=15_000)
    expect(page.locator("#live-status")).to_contain_text("Updated live: TASK_CANCELLED")
    assert page.evaluate("window.notReloaded") is True


def test_a_tasks_earlier_events_are_a_link_away_in_the_browser(
    page: Any, server: ApiServer, scene: Scenario
) -> None:
    from playwright.sync_api import expect

    task_id, lease = scene.claimed()
    ledger = TaskLedger(server.db)
    try:
        for _ in range(EVENTS_SHOWN):
            ledger.heartbeat(task_id, lease_token=lease, lease_seconds=300)
    finally:
        ledger.close()
    sign_in(page, server, "auditor")
    page.goto(f"{server.url}/tasks/{task_id}")
    rows = page.locator("table.timeline tbody tr td:nth-child(2)")
    assert rows.count() == EVENTS_SHOWN and "TASK_CREATED" not in rows.all_inner_texts()
    assert page.locator("ol.seals > li").count() == EVENTS_SHOWN
    accessible(page)
    page.get_by_role("link", name="Earlier events").click()
    expect(rows).to_have_text(["TASK_CREATED", "TASK_CLAIMED"])
    accessible(page)
    page.get_by_role("link", name="Latest events").click()
    expect(rows).to_have_count(EVENTS_SHOWN)


def test_a_forged_verify_in_the_browser_is_refused(
    page: Any, server: ApiServer, scene: Scenario
) -> None:
    task_id = scene.submitted()
    sign_in(page, server, "reviewer")
    page.goto(f"{server.url}/tasks/{task_id}")
    page.evaluate("document.querySelector('#verify-form input[name=csrf_token]').remove()")
    page.get_by_label("Reason").fill("forged")
    page.get_by_role("button", name="Verify the result").click()
    assert "CSRF_INVALID" in page.get_by_role("alert").inner_text()
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "SUBMITTED"


def test_a_reviewer_sends_it_back_for_rework_with_a_reason(
    page: Any, server: ApiServer, scene: Scenario
) -> None:
    from playwright.sync_api import expect

    task_id = scene.submitted()
    sign_in(page, server, "reviewer")
    page.goto(f"{server.url}/tasks/{task_id}")
    page.get_by_label("Decision").select_option("NEEDS_REWORK")
    page.get_by_label("Reason").fill("the tests do not cover the empty list")
    page.get_by_role("button", name="Verify the result").click()
    expect(page.locator("#task-status")).to_have_text("QUEUED")  # back in the queue
    verdict = page.locator("table.timeline tbody tr").last
    assert verdict.locator("td").nth(1).inner_text() == "TASK_VERIFIED"
    # The verdict names who gave it, and how: the reviewer's token, through the console.
    assert verdict.locator("td").nth(2).inner_text() == "reviewer-1 (reviewer, console)"
    assert verdict.locator("td").nth(5).inner_text() == "NEEDS_REWORK"
    assert verdict.locator("td").nth(6).inner_text() == "the tests do not cover the empty list"
    assert page.get_by_role("button", name="Verify the result").count() == 0
    accessible(page)
    verified = scene.owner.get(f"/v1/tasks/{task_id}").json()
    assert verified["verification"]["decision"] == "NEEDS_REWORK", verified
