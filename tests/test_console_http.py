"""The console's frame over HTTP, against the server `serve` runs: sign-in and its cookie,
sessions (logout, a revoked token, idle and absolute expiry), CSRF, roles, the task list's
paging shared with `GET /v1/tasks`, and no token ever in a page, a redirect or the log."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.shell import Database
from aios_ledger.shell.api.tokens import revoke_token
from aios_ledger.shell.web.sessions import SessionSettings, SessionStore
from api_server import ROLE_NAMES, ApiServer, Scenario
from console_support import browser, csrf_of, signed_in

KEY = re.compile(r'name="idempotency_key" value="([^"]+)"')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    path = tmp_path_factory.mktemp("console") / "ledger.db"
    with ApiServer(path, role_tokens=True) as served:
        yield served


@pytest.fixture
def scene(server: ApiServer) -> Scenario:
    return Scenario(server)


@pytest.mark.parametrize("role", ["agent", "reviewer", "owner", "auditor"])
def test_each_role_signs_in_with_a_strict_http_only_cookie(server: ApiServer, role: str) -> None:
    client = browser(server)
    answer = client.post("/sign-in", data={"token": server.tokens[role]})
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # served over plain HTTP here
    page = client.get("/tasks")
    assert page.status_code == 200
    assert f"<strong>{ROLE_NAMES[role]}</strong> ({role})" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_the_cookie_is_secure_when_the_console_is_served_over_tls(server: ApiServer) -> None:
    """Behind a proxy on this host that ends TLS and says so (`X-Forwarded-Proto: https`, which
    uvicorn trusts from 127.0.0.1 by default), the request is https: the cookie is `Secure`."""
    client = browser(server)
    answer = client.post(
        "/sign-in", data={"token": server.tokens["owner"]}, headers={"X-Forwarded-Proto": "https"}
    )
    assert answer.status_code == 303, answer.text
    cookie = answer.headers["set-cookie"]
    assert "; Secure" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert server.tokens["owner"] not in cookie


@pytest.mark.parametrize("token", ["not-a-token", "witness"])
def test_a_wrong_token_is_refused_without_a_session(server: ApiServer, token: str) -> None:
    """An unknown token, and a witness's (whose only routes are the checkpoints')."""
    client = browser(server)
    answer = client.post("/sign-in", data={"token": server.tokens.get(token, token)})
    assert answer.status_code == 401
    assert "set-cookie" not in answer.headers
    assert "That token was refused" in answer.text
    assert client.get("/tasks").headers["location"] == "/sign-in"


def test_signed_out_pages_redirect_to_sign_in_and_home_is_the_tasks(server: ApiServer) -> None:
    client = browser(server)
    assert client.get("/").headers["location"] == "/tasks"
    for path in ("/tasks", "/tasks/anything"):
        answer = client.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/sign-in")
    assert client.get("/v1/nowhere").json()["code"] == "ROUTE_NOT_FOUND"  # the API unchanged


def test_logout_ends_the_session(server: ApiServer) -> None:
    client = signed_in(server, "reviewer")
    cookie = dict(client.cookies)
    token = csrf_of(client)
    answer = client.post("/sign-out", data={"csrf_token": token})
    assert (answer.status_code, answer.headers["location"]) == (303, "/sign-in")
    replayed = browser(server)
    replayed.cookies.update(cookie)  # the old cookie, kept by an attacker: the session is gone
    assert replayed.get("/tasks").headers["location"] == "/sign-in"


def test_a_forged_post_is_refused_and_changes_nothing(server: ApiServer, scene: Scenario) -> None:
    task_id = scene.queued()
    client = signed_in(server, "owner")
    page = client.get(f"/tasks/{task_id}")
    key = KEY.search(page.text)
    assert key is not None
    token = csrf_of(client, f"/tasks/{task_id}")
    form = {"reason": "forged", "idempotency_key": key.group(1)}
    forgeries = [
        ({}, form),  # no CSRF token at all
        ({}, {**form, "csrf_token": "x" * len(token)}),  # a wrong one
        ({"Origin": "http://evil.example"}, {**form, "csrf_token": token}),
        ({"Sec-Fetch-Site": "cross-site"}, {**form, "csrf_token": token}),
    ]
    for headers, data in forgeries:
        answer = client.post(f"/tasks/{task_id}/cancel", data=data, headers=headers)
        assert answer.status_code == 403, (headers, answer.text)
        assert "CSRF_INVALID" in answer.text
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "QUEUED"
    done = client.post(
        f"/tasks/{task_id}/cancel",
        data={**form, "csrf_token": token},
        headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
    )
    assert (done.status_code, done.headers["location"]) == (303, f"/tasks/{task_id}")
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "CANCELLED"


def test_a_cross_site_sign_in_is_refused(server: ApiServer) -> None:
    answer = browser(server).post(
        "/sign-in", data={"token": server.tokens["owner"]}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert answer.status_code == 403 and "CSRF_INVALID" in answer.text
    assert "set-cookie" not in answer.headers


def test_an_auditor_sees_no_action_and_the_server_refuses_it(
    server: ApiServer, scene: Scenario
) -> None:
    task_id = scene.queued()
    auditor = signed_in(server, "auditor")
    page = auditor.get(f"/tasks/{task_id}")
    assert page.status_code == 200
    assert "/cancel" not in page.text and "<button" in page.text  # only the sign-out button
    answer = auditor.post(
        f"/tasks/{task_id}/cancel",
        data={"csrf_token": csrf_of(auditor), "reason": "r", "idempotency_key": "k-auditor"},
    )
    assert answer.status_code == 403 and "FORBIDDEN" in answer.text
    assert scene.owner.get(f"/v1/tasks/{task_id}").json()["status"] == "QUEUED"


def test_a_revoked_token_ends_its_sessions_on_the_next_request(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "ledger.db", role_tokens=True) as server:
        client = signed_in(server, "owner")
        assert client.get("/tasks").status_code == 200
        with Database(server.db) as db:
            revoke_token(db, ROLE_NAMES["owner"])
        assert client.get("/tasks").headers["location"] == "/sign-in"


def test_the_task_page_shows_status_and_timeline(server: ApiServer, scene: Scenario) -> None:
    task_id = scene.submitted()
    page = signed_in(server, "reviewer").get(f"/tasks/{task_id}")
    assert page.status_code == 200
    assert 'id="task-status">SUBMITTED<' in page.text
    for event in ("TASK_CREATED", "TASK_CLAIMED", "RESULT_SUBMITTED"):
        assert f"<td>{event}</td>" in page.text
    assert "<td>agent-1</td>" in page.text
    missing = signed_in(server, "reviewer").get("/tasks/no-such-task")
    assert missing.status_code == 404 and "TASK_NOT_FOUND" in missing.text


def test_the_api_pages_by_cursor_with_the_filters(server: ApiServer, scene: Scenario) -> None:
    made = [scene.queued(goal=f"needle {n}") for n in range(5)]
    owner = scene.owner
    seen: list[str] = []
    params: dict[str, str | int] = {"capability": scene.cap, "limit": 2}
    while True:
        answer = owner.get("/v1/tasks", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        seen += [task["task_id"] for task in page["tasks"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == made[::-1]  # newest first, each once
    cursor = owner.get("/v1/tasks", params={"capability": scene.cap, "limit": 2}).json()
    for forged in (
        {"capability": scene.cap, "cursor": "bm90LWEtY3Vyc29y"},
        {"capability": scene.cap, "cursor": cursor["next_cursor"][:-2] + "AA"},
        {"status": "QUEUED", "cursor": cursor["next_cursor"]},  # another filter's cursor
    ):
        refused = owner.get("/v1/tasks", params=forged)
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] == "CURSOR_INVALID"
    search = owner.get("/v1/tasks", params={"search": "NEEDLE 3", "capability": scene.cap})
    assert [task["task_id"] for task in search.json()["tasks"]] == [made[3]]
    by_id = owner.get("/v1/tasks", params={"search": made[1]}).json()["tasks"]
    assert [task["task_id"] for task in by_id] == [made[1]]
    bad = owner.get("/v1/tasks", params={"created_from": "yesterday"})
    assert bad.json()["code"] == "FIELDS_INVALID"


def test_the_tasks_page_filters_and_links_to_the_next_page(
    server: ApiServer, scene: Scenario
) -> None:
    made = [scene.queued(goal=f"page goal {n}") for n in range(3)]
    client = signed_in(server, "auditor")
    page = client.get("/tasks", params={"capability": scene.cap, "status": "QUEUED"})
    assert page.status_code == 200
    assert all(task_id in page.text for task_id in made)
    assert 'rel="next"' not in page.text
    refused = client.get("/tasks", params={"cursor": "forged"})
    assert refused.status_code == 400 and "CURSOR_INVALID" in refused.text


def test_no_token_reaches_a_page_a_redirect_or_the_log(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "ledger.db", role_tokens=True) as server:
        token = server.tokens["owner"]
        client = browser(server)
        answers = [client.post("/sign-in", data={"token": token})]
        answers += [client.get(path) for path in ("/", "/tasks", "/tasks/none", "/sign-in")]
        answers.append(client.post("/sign-in", data={"token": token + "x"}))
        for answer in answers:
            assert token not in answer.text
            assert all(token not in value for value in answer.headers.values())
        server.stop()
        assert token not in server.log()


def test_serve_holds_sessions_to_its_idle_and_absolute_settings(tmp_path: Path) -> None:
    """`serve --session-idle-seconds` ends a session left unused that long (on the console's
    session clock, set forward here); `--session-max-seconds` is the cookie's life."""
    with ApiServer(
        tmp_path / "ledger.db",
        "--session-idle-seconds",
        "2",
        "--session-max-seconds",
        "3600",
        role_tokens=True,
    ) as server:
        console = server.app.state.console
        now = [0.0]
        console.sessions = SessionStore(console.sessions.settings, clock=lambda: now[0])
        client = browser(server)
        answer = client.post("/sign-in", data={"token": server.tokens["owner"]})
        assert "Max-Age=3600" in answer.headers["set-cookie"]
        now[0] = 1.9
        assert client.get("/tasks").status_code == 200  # within its idle time
        now[0] = 1.9 + 2.5
        assert client.get("/tasks").headers["location"] == "/sign-in"


def test_sessions_end_idle_and_at_their_absolute_expiry() -> None:
    now = [0.0]
    store = SessionStore(SessionSettings(idle_seconds=10, max_seconds=25), clock=lambda: now[0])
    busy, _ = store.open("a" * 64)
    idle, _ = store.open("b" * 64)
    for moment in (9.0, 18.0):
        now[0] = moment
        assert store.find(busy) is not None  # used within its idle time: still alive
    assert store.find(idle) is None  # unused for 18 s: ended
    now[0] = 25.0
    assert store.find(busy) is None  # 25 s after sign-in, however busy
    assert store.count() == 0


def test_a_rare_status_is_read_through_its_index_with_the_same_pages(
    server: ApiServer, scene: Scenario
) -> None:
    """A status of few tasks is read through tasks_page_of_status (`page_statement`), a common
    one through the creation order: the pages are the same rows either way."""
    cancelled = [scene.cancelled() for _ in range(3)]
    owner = scene.owner
    page = owner.get("/v1/tasks", params={"status": "CANCELLED", "limit": 2}).json()
    rest = owner.get(
        "/v1/tasks", params={"status": "CANCELLED", "limit": 2, "cursor": page["next_cursor"]}
    ).json()
    seen = [task["task_id"] for task in page["tasks"] + rest["tasks"]]
    assert seen[:3] == cancelled[::-1]
    assert all(task["status"] == "CANCELLED" for task in page["tasks"] + rest["tasks"])


def test_assets_are_linked_by_digest_and_cached_for_good_while_pages_are_not(
    server: ApiServer, scene: Scenario
) -> None:
    """A page's stylesheet and script are at content-digest addresses (the address is the
    bytes' SHA-256), cacheable for a year without revalidation; the page itself stays
    no-store, and the plain address still answers, revalidated on every use."""
    client = signed_in(server, "owner")
    task_id = scene.queued()
    static = Path(__file__).resolve().parent.parent / "shell" / "web" / "static"
    linked: set[str] = set()
    for path in ("/tasks", f"/tasks/{task_id}", "/log"):
        page = client.get(path)
        assert page.headers["cache-control"] == "no-store"
        linked |= set(re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text))
    assert {address.split("/")[-1].split(".")[0] for address in linked} == {
        "console",
        "live",
        "log",
    }
    for address in linked:
        stem, digest, suffix = address.removeprefix("/static/").split(".")
        body = (static / f"{stem}.{suffix}").read_bytes()
        assert digest == hashlib.sha256(body).hexdigest()[:12]
        answer = client.get(address)
        assert answer.status_code == 200 and answer.content == body
        assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert answer.headers["content-type"].startswith(("text/css", "text/javascript"))
        again = client.get(address, headers={"if-none-match": answer.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        plain = client.get(f"/static/{stem}.{suffix}")
        assert plain.content == body and plain.headers["cache-control"] == "no-cache"
    wrong = client.get("/static/console.000000000000.css")
    assert wrong.status_code == 404
