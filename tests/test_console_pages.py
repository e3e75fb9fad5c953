"""The console's Repositories, Agents and tokens, Log and Health pages over HTTP, against
the server `serve` runs, on a seeded ledger (tests/console_seed.py): what each shows, that no
token or digest is ever on a page, that only an auditor or the owner starts `verify` (and its
progress and result), and the charts drawn from the ledger's events with their tables."""

from __future__ import annotations

import hashlib
import html
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell.api.tokens import issue_token, list_tokens
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.git.remotes import Credentials
from aios_ledger.shell.git.repos import add_remote_repository, change_repository_settings
from aios_ledger.shell.web.pages.agents import CAPABILITIES_SHOWN, TOKENS_SHOWN
from api_server import ROLE_NAMES, ApiServer
from conftest import HTTP_TOKEN
from console_seed import LANDED_TASK, REVOKED, seed_ledger, seed_tasks
from console_support import MAX_PAGE_BYTES, csrf_of, signed_in
from git_servers import HttpServer, serve
from git_support import REPOSITORY, make_repository

PAGES = ("/repositories", "/agents", "/log", "/health")
PATIENCE = 60.0  # seconds: a bound on waiting for a verify run, never a speed assertion


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("console-pages")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PROPOSALS_DIR_ENV, str(root / "proposals"))
        landed = seed_ledger(root, root / "ledger.db")
        with ApiServer(root / "ledger.db", role_tokens=True) as served:
            seed_tasks(served)
            yield served, landed


@pytest.fixture(scope="module")
def server(seeded: tuple[ApiServer, dict[str, Any]]) -> ApiServer:
    return seeded[0]


@pytest.mark.parametrize("role", ["agent", "reviewer", "owner", "auditor"])
def test_every_page_shows_to_every_role_with_no_token_or_digest(
    server: ApiServer, role: str
) -> None:
    client = signed_in(server, role)
    for path in PAGES:
        page = client.get(path)
        assert page.status_code == 200, (path, page.text)
        assert f'href="{path}" aria-current="page"' in page.text  # in the navigation
        for token in server.tokens.values():
            assert token not in page.text
            assert hashlib.sha256(token.encode()).hexdigest() not in page.text


def test_repositories_show_the_repository_its_move_and_lease(
    seeded: tuple[ApiServer, dict[str, Any]],
) -> None:
    server, landed = seeded
    page = signed_in(server, "reviewer").get("/repositories").text
    row = re.search(rf"<td>{REPOSITORY}</td>.*?</tr>", page, re.S)
    assert row is not None
    # Governed in place, with no pull requests: the two columns say so rather than stay blank.
    assert "<td>none: governed in place</td>\n      <td>none</td>" in row.group(0)
    assert "<code>main</code>, <code>master</code>, <code>release/*</code>" in page  # the default
    move = re.search(r"<code>(\w{12})</code></a></td>\s*<td>APPLIED</td>", page)
    assert move is not None and landed["new_oid"].startswith(move.group(1))
    assert "No writer lease is held now." in page  # the landed write released its lease


def test_a_remote_repository_shows_its_url_and_where_its_pull_requests_go(
    tmp_path: Path, http_git_server: HttpServer
) -> None:
    bare, _ = make_repository(tmp_path / "served" / "acme")
    serve(bare, None)
    token_file = tmp_path / "remote-token"
    token_file.write_text(HTTP_TOKEN + "\n")
    url = http_git_server.url(bare)
    pull_requests = {
        "forge": "gitlab",
        "api_url": "https://gitlab.example.org/api/v4",
        "project": "group/sub/widgets",
        "base_branch": "release/1",
    }
    with Database(tmp_path / "ledger.db") as db:
        credentials = Credentials(token_file=str(token_file))
        add_remote_repository(db, REPOSITORY, url, str(tmp_path / "mirror.git"), credentials)
        change_repository_settings(
            db, REPOSITORY, {"pull_request": pull_requests}, idempotency_key="prs-on"
        )
    with ApiServer(tmp_path / "ledger.db", role_tokens=True) as server:
        page = signed_in(server, "auditor").get("/repositories").text
    row = re.search(rf"<td>{REPOSITORY}</td>.*?</tr>", page, re.S)
    assert row is not None
    assert f"<td><code>{html.escape(url)}</code></td>" in row.group(0)
    assert (
        "opened on gitlab for <code>group/sub/widgets</code> into <code>release/1</code>"
        in row.group(0)
    )
    # The remote's token is in its file only: neither it nor where it lives is on the page.
    assert HTTP_TOKEN not in page and str(token_file) not in page


def test_a_commit_leads_back_to_its_task(seeded: tuple[ApiServer, dict[str, Any]]) -> None:
    server, landed = seeded
    client = signed_in(server, "auditor")
    page = client.get("/repositories", params={"commit": landed["new_oid"]}).text
    assert f'<a href="/tasks/{LANDED_TASK}">{LANDED_TASK}</a>' in page
    assert "signed by key" in page and "SUCCEEDED" in page
    unknown = client.get("/repositories", params={"commit": "abcdef12"}).text
    assert "no landed governed write moved a branch to abcdef12" in html.unescape(unknown)
    wrong = client.get("/repositories", params={"commit": "<script>"})
    assert wrong.status_code == 200 and "<script>" not in wrong.text
    assert "is not a commit id" in html.unescape(wrong.text)


def test_agents_and_tokens_show_grants_holders_heartbeats_and_the_revoked(
    server: ApiServer,
) -> None:
    page = signed_in(server, "owner").get("/agents").text
    revoked = re.search(rf"<td>{REVOKED}</td>.*?</tr>", page, re.S)
    assert revoked is not None and "REVOKED" in revoked.group(0)
    agent = re.search(rf"<td>{ROLE_NAMES['agent']}</td>\s*<td>agent</td>.*?</tr>", page, re.S)
    assert agent is not None and "any capability" in agent.group(0)
    held = page.split('id="held-heading"')[1].split("</section>")[0]
    assert f">{ROLE_NAMES['agent']}</a></td>" in held  # the claimed task's holder, linked
    beats = page.split('id="beats-heading"')[1].split("</section>")[0]
    assert f">{ROLE_NAMES['agent']}</a></td>" in beats


def test_the_tokens_are_shown_a_page_at_a_time_under_100_kb(tmp_path: Path) -> None:
    """Many tokens, each granted many long capabilities (a revoked token stays listed, so the
    list only grows): each page under 100 KB, every token once by name through "Next tokens",
    each grant by its first capabilities."""
    capabilities = [f"capability-{n:02d}-{'x' * 40}" for n in range(40)]
    with ApiServer(tmp_path / "ledger.db", role_tokens=True) as server:
        with Database(server.db) as db:
            for n in range(TOKENS_SHOWN * 2 + 7):
                issue_token(db, f"fleet-{n:03d}", ["agent"], capabilities=capabilities)
            names = sorted(token["name"] for token in list_tokens(db))
        client = signed_in(server, "auditor")
        seen: list[str] = []
        path: str | None = "/agents"
        while path is not None:
            page = client.get(path)
            assert page.status_code == 200, page.text
            assert len(page.content) < MAX_PAGE_BYTES, (path, len(page.content))
            tokens = page.text.split('id="tokens-heading"')[1].split("</section>")[0]
            seen += re.findall(r"<tr>\s*<td>([^<]+)</td>", tokens)
            more = f"and {len(capabilities) - CAPABILITIES_SHOWN} more"
            assert more in tokens and capabilities[CAPABILITIES_SHOWN] not in tokens
            following = re.search(r'<a rel="next" href="([^"]+)">Next tokens</a>', tokens)
            path = html.unescape(following.group(1)) if following else None
        assert seen == names


def _progress(client: Any) -> dict[str, Any]:
    answer = client.get("/log/verify/progress")
    assert answer.status_code == 200
    run: dict[str, Any] = answer.json()["run"]
    return run


def test_only_an_auditor_or_the_owner_starts_verify(server: ApiServer) -> None:
    for role in ("agent", "reviewer"):
        client = signed_in(server, role)
        assert "Run verify now" not in client.get("/log").text
        refused = client.post("/log/verify", data={"csrf_token": csrf_of(client, "/log")})
        assert refused.status_code == 403 and "FORBIDDEN" in refused.text
    auditor = signed_in(server, "auditor")
    page = auditor.get("/log").text
    assert "Run verify now" in page
    forged = auditor.post("/log/verify", data={"csrf_token": "forged"})
    assert forged.status_code == 403 and "CSRF_INVALID" in forged.text
    started = auditor.post("/log/verify", data={"csrf_token": csrf_of(auditor, "/log")})
    assert (started.status_code, started.headers["location"]) == (303, "/log")
    deadline = time.monotonic() + PATIENCE
    run = _progress(auditor)
    while run["running"]:
        assert time.monotonic() < deadline, run
        time.sleep(0.1)
        run = _progress(auditor)
    assert run["intact"] is True and run["started_by"] == ROLE_NAMES["auditor"]
    assert run["done"] == run["total"] > 0
    shown = signed_in(server, "agent").get("/log").text  # every reader sees the result
    assert "INTACT" in shown and f"by {ROLE_NAMES['auditor']}" in shown


def test_the_log_shows_its_head_checkpoint_and_archives(server: ApiServer) -> None:
    page = signed_in(server, "reviewer").get("/log").text
    size = re.search(r'id="tree-size">(\d+)<', page)
    assert size is not None and int(size.group(1)) > 0
    checkpoints = page.split('id="checkpoints-heading"')[1].split("</section>")[0]
    assert "<td>1</td>" in checkpoints  # the seeded checkpoint, the first
    assert "No archive was taken." in page


def _chart_table(page: str, title: str) -> dict[str, int]:
    figure = page.split(f"<strong>{title}</strong>")[1].split("</figure>", maxsplit=1)[0]
    assert 'role="img"' in figure and "<rect" in figure
    return {
        hour: int(count)
        for hour, count in re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td></tr>", figure)
    }


def test_health_charts_count_the_ledgers_events_by_hour(server: ApiServer) -> None:
    page = signed_in(server, "reviewer").get("/health").text
    created = _chart_table(page, "Tasks created per hour")
    assert len(created) == 24 and sum(created.values()) >= 8  # the seeded tasks at least
    failures = _chart_table(page, "Review failures per hour (verdicts FAILED or NEEDS_REWORK)")
    assert sum(failures.values()) == 2  # FAILED and NEEDS_REWORK, not SUCCEEDED
    verdicts = _chart_table(page, "Verdicts per hour (throughput)")
    assert sum(verdicts.values()) == 4  # the three seeded and the landed task's
    depth = _chart_table(page, "Queue depth at the end of each hour (estimated)")
    assert list(depth.values())[-1] == 4  # three queued and the one sent back for rework
    expiries = _chart_table(page, "Lease expiries per hour")
    assert sum(expiries.values()) == 1  # the seeded lease that ran out
    batches = _chart_table(page, "Group-commit batch sizes since this server started")
    assert sum(batches.values()) > 0  # the seeding's writes, through group commit
    assert '<a href="/metrics">/metrics</a>' in page


def test_every_event_names_its_actor_and_a_tasks_timeline_shows_it(
    seeded: tuple[ApiServer, dict[str, Any]],
) -> None:
    """A ledger written through the library (the seeded repository, write, tokens, checkpoint,
    expired lease) and through a running server's API (every task's lifecycle): no event
    without an actor, the API's naming their tokens, and a verdict's reviewer in the task's
    timeline on the console."""
    server, _ = seeded
    with sqlite3.connect(server.db) as conn:
        rows = conn.execute(
            "SELECT event_type, actor FROM events WHERE task_id IS NULL OR task_id <> ?",
            (LANDED_TASK,),  # written through the library: its actor is the process's user
        ).fetchall()
    assert rows and all(actor is not None for _, actor in rows), [
        kind for kind, actor in rows if actor is None
    ]
    verdicts = [json.loads(actor) for kind, actor in rows if kind == "TASK_VERIFIED"]
    reviewer = ROLE_NAMES["reviewer"]
    assert {(v["name"], v["via"], tuple(v["roles"])) for v in verdicts} == {
        (reviewer, "http", ("reviewer",))
    }
    verified = server.client("owner").get("/v1/tasks", params={"status": "SUCCEEDED"}).json()
    task_id = next(task["task_id"] for task in verified["tasks"] if task["task_id"] != LANDED_TASK)
    page = signed_in(server, "auditor").get(f"/tasks/{task_id}").text
    assert f'<td class="actor">{reviewer} (reviewer, http)</td>' in page
