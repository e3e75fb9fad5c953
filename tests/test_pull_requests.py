"""The pull request after a governed write, against a loopback forge that checks every request
and answer against the forge's published API description (`tests/forge_server.py`): one request
per write, an open one adopted, a forge's refusal sealed with its code and retried by the same
write, no token anywhere but its file, and `why`, the API and the console showing it."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.attest.why import why_summary
from aios_ledger.core.git.forges import (
    SETTING_INVALID,
    PullRequestSetting,
    resolve_setting,
)
from aios_ledger.shell.attest.commits import why_commit
from aios_ledger.shell.attest.keys import generate_key
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.git.remotes import Credentials
from aios_ledger.shell.git.repos import (
    add_remote_repository,
    change_repository_settings,
    repository_row,
    show_repository,
)
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.log.verification import verify_log
from api_server import ApiServer
from conftest import ENGINES, HTTP_TOKEN
from console_support import signed_in
from forge_server import (
    DESCRIBED,
    Checker,
    FakeForge,
    PullRequest,
    description,
    forge_server,
    resolve,
)
from git_servers import HttpServer, serve
from git_support import (
    AGENT,
    REPOSITORY,
    binding,
    events_of,
    make_repository,
    ref,
    register,
    verified_proposal,
)

TOKEN = "forge-token-4f1c9a7e-never-shown"
PROJECT = "acme/widgets"
FORGES = ("github", "gitea", "gitlab")


class Governed:
    """A governed repository on this machine whose pull requests go to a fake forge."""

    def __init__(self, root: Path, forge: FakeForge, *, db: Path | str | None = None) -> None:
        self.root = root
        self.db = db or root / "ledger.db"
        self.forge = forge
        self.bare, self.base = make_repository(root)
        register(self.db, self.bare)
        self.token_file = root / "forge-token"
        self.token_file.write_text(TOKEN + "\n")
        self.key = generate_key("ledger.test")

    def opt_in(self, **changes: Any) -> dict[str, Any]:
        setting = {
            "forge": self.forge.kind,
            "api_url": self.forge.api_url,
            "project": PROJECT,
            "token_file": str(self.token_file),
            **changes,
        }
        with Database(self.db) as db:
            return dict(
                change_repository_settings(
                    db, REPOSITORY, {"pull_request": setting}, idempotency_key=f"pr-{len(changes)}"
                )
            )

    def verified(self, task_id: str) -> None:
        verified_proposal(
            self.db,
            task_id,
            binding(task_id, self.base),
            {"src/widget.py": f"print({task_id!r})\n"},
            reviewer="reviewer-3",
        )

    def write(self, task_id: str, key: str) -> dict[str, Any]:
        with Database(self.db) as db:
            return dict(
                governed_write(
                    db, {"task_id": task_id, "idempotency_key": key}, attest_key=self.key
                )
            )


@pytest.fixture(params=FORGES)
def governed(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Governed]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    with forge_server(request.param, token=TOKEN, project=PROJECT) as forge:
        found = Governed(tmp_path, forge)
        found.opt_in()
        yield found
        # Every request the ledger sent and every answer it read is what the description allows.
        assert forge.violations == []
    with Database(found.db) as db:
        report = verify_log(db)
    assert report.intact, report.public()
    # The token is in its file and in the forge's requests' headers, nowhere in the ledger.
    assert TOKEN.encode() not in Path(found.db).read_bytes()


def test_a_landed_write_opens_one_pull_request_and_the_same_write_again_none(
    governed: Governed,
) -> None:
    forge = governed.forge
    governed.verified("task-a")
    answer = governed.write("task-a", "write-a")
    opened = answer["pull_request"]
    assert opened["state"] == "OPENED" and opened["idempotent"] is False
    assert (opened["number"], opened["head"], opened["base"]) == (1, "agent/task-a", "main")
    assert opened["url"] == forge.web_url(forge.pulls[0])
    assert (opened["forge"], opened["project"], opened["adopted"]) == (forge.kind, PROJECT, False)
    [created] = forge.created()
    text = "description" if forge.kind == "gitlab" else "body"
    title, body = created[3]["title"], created[3][text]
    assert title == "Improve widgets (task-a)"
    for named in ("task-a", AGENT, "reviewer-3", "SUCCEEDED", "write-a", "sha256:"):
        assert named in body
    # Looked for first, then opened: one request each.
    assert [r[0] for r in forge.requests] == ["GET", "POST"]

    again = governed.write("task-a", "write-a")
    assert again["pull_request"] == {**opened, "idempotent": True}
    assert len(forge.requests) == 2, "the sealed event answers: the forge is not asked again"
    assert events_of(governed.db, "task-a")[-2:] == ["COMMIT_ATTESTED", "PULL_REQUEST_OPENED"]


def test_an_open_request_on_the_forge_is_adopted_not_doubled(governed: Governed) -> None:
    forge = governed.forge
    forge.pulls.append(PullRequest(7, "agent/task-b", "main", "opened by hand", ""))
    governed.verified("task-b")
    opened = governed.write("task-b", "write-b")["pull_request"]
    assert (opened["number"], opened["adopted"]) == (7, True)
    assert forge.created() == [] and len(forge.pulls) == 1


def test_a_refused_request_is_sealed_and_the_same_write_retries_it(governed: Governed) -> None:
    forge = governed.forge
    refusal = (
        {"message": "Validation Failed", "documentation_url": "https://docs.github.com/rest"}
        if forge.kind == "github"
        else None
    )
    forge.refuse_next_create = (422, refusal)
    governed.verified("task-c")
    answer = governed.write("task-c", "write-c")
    assert answer["state"] == "APPLIED", "a forge's refusal leaves the write standing"
    failed = answer["pull_request"]
    assert (failed["state"], failed["code"], failed["status"]) == (
        "FAILED",
        "PULL_REQUEST_REFUSED",
        422,
    )
    assert "aios-ledger write task-c" in failed["retry"]
    retried = governed.write("task-c", "write-c")["pull_request"]
    assert retried["state"] == "OPENED" and retried["number"] == 1
    assert events_of(governed.db, "task-c")[-2:] == ["PULL_REQUEST_FAILED", "PULL_REQUEST_OPENED"]


def test_a_wrong_token_is_refused_and_recorded_without_it(governed: Governed) -> None:
    wrong = governed.root / "wrong-token"
    wrong.write_text("not-the-forges-token\n")
    governed.opt_in(token_file=str(wrong))
    governed.verified("task-d")
    failed = governed.write("task-d", "write-d")["pull_request"]
    assert (failed["code"], failed["status"]) == ("PULL_REQUEST_AUTH_REFUSED", 401)
    assert "not-the-forges-token" not in str(failed)
    assert governed.forge.created() == []


def test_a_forge_that_echoes_the_token_has_it_redacted(governed: Governed) -> None:
    forge = governed.forge
    # Only GitHub describes a body for its refusal; Gitea's 403 and GitLab's 401 have none.
    echoed = {"message": f"token {TOKEN} may not open pull requests"}
    refusals = {"github": (403, echoed), "gitea": (403, None), "gitlab": (401, None)}
    forge.refuse_next_create = refusals[forge.kind]
    governed.verified("task-e")
    failed = governed.write("task-e", "write-e")["pull_request"]
    assert (failed["code"], failed["status"]) == (
        "PULL_REQUEST_AUTH_REFUSED",
        refusals[forge.kind][0],
    )
    if forge.kind == "github":
        assert "[REDACTED]" in failed["message"] and TOKEN not in failed["message"]


def test_why_and_the_write_answer_show_the_request(governed: Governed) -> None:
    governed.verified("task-f")
    answer = governed.write("task-f", "write-f")
    with Database(governed.db) as db:
        document = why_commit(db, answer["new_oid"])
    [write] = why_summary(document).writes
    lines = dict(write)
    assert lines["pull request"].startswith(f"#1 {answer['pull_request']['url']}")
    assert f"{governed.forge.kind} {PROJECT} agent/task-f -> main" in lines["pull request"]


def test_a_repository_without_the_setting_opens_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    bare, base = make_repository(tmp_path)
    db_path = tmp_path / "ledger.db"
    register(db_path, bare)
    verified_proposal(db_path, "task-g", binding("task-g", base), {"a.txt": "a\n"})
    with Database(db_path) as db:
        answer = governed_write(db, {"task_id": "task-g", "idempotency_key": "write-g"})
    assert "pull_request" not in answer
    assert "PULL_REQUEST_OPENED" not in events_of(db_path, "task-g")


# --- the setting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remote", "given", "api_url", "project"),
    [
        ("git@github.com:acme/widgets.git", {"forge": "github"}, "https://api.github.com", PROJECT),
        ("https://github.com/acme/widgets", {"forge": "github"}, "https://api.github.com", PROJECT),
        (
            "https://git.example.org/acme/widgets.git",
            {"forge": "gitea"},
            "https://git.example.org/api/v1",
            PROJECT,
        ),
        (
            # A forge under a path: the project named tells the prefix from the groups.
            "https://example.org/gitlab/group/sub/widgets.git",
            {"forge": "gitlab", "project": "group/sub/widgets"},
            "https://example.org/gitlab/api/v4",
            "group/sub/widgets",
        ),
        (
            "ssh://git@gitlab.com/group/widgets.git",
            {"forge": "gitlab"},
            "https://gitlab.com/api/v4",
            "group/widgets",
        ),
        (
            "git@git.example.org:acme/widgets.git",
            {"forge": "gitea", "api_url": "https://git.example.org:3000/api/v1/"},
            "https://git.example.org:3000/api/v1",
            PROJECT,
        ),
    ],
)
def test_the_api_and_project_are_derived_from_the_remote_where_unambiguous(
    remote: str, given: dict[str, str], api_url: str, project: str
) -> None:
    setting = resolve_setting(given, remote)
    assert (setting.api_url, setting.project) == (api_url, project)


@pytest.mark.parametrize(
    ("remote", "given", "why"),
    [
        ("git@git.example.org:acme/widgets.git", {"forge": "gitea"}, "api_url"),
        (None, {"forge": "github", "api_url": "https://api.github.com"}, "project"),
        ("git@github.com:acme/widgets.git", {"forge": "bitbucket"}, "forge"),
        (None, {"forge": "github", "api_url": "https://x", "project": "a/b/c"}, "owner/name"),
        (None, {"forge": "gitea", "api_url": "ftp://x", "project": PROJECT}, "api_url"),
        (None, {"forge": "gitea", "api_url": "https://u:p@x", "project": PROJECT}, "credential"),
        (None, {"forge": "gitea", "api_url": "http://git.example.org", "project": PROJECT}, "http"),
        (
            None,
            {"forge": "gitea", "api_url": "https://x", "project": PROJECT, "token_file": "t"},
            "absolute",
        ),
        (None, {"forge": "gitea", "api_url": "https://x", "project": PROJECT, "pat": "t"}, "pat"),
        (None, ["github"], "object"),
    ],
)
def test_a_bad_setting_is_refused_with_its_code(remote: str | None, given: Any, why: str) -> None:
    with pytest.raises(LedgerError) as refused:
        resolve_setting(given, remote)
    assert refused.value.code == SETTING_INVALID and why in refused.value.detail


def test_the_setting_is_sealed_shown_and_cleared_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bare, _ = make_repository(tmp_path)
    db_path = tmp_path / "ledger.db"
    register(db_path, bare)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    common = ["--db", str(db_path), "repo", "settings", REPOSITORY, "--idempotency-key"]
    assert (
        main(
            [
                *common,
                "k1",
                "--pull-requests",
                "gitea",
                "--forge-api",
                "https://git.example.org/api/v1",
                "--forge-project",
                PROJECT,
                "--forge-token-file",
                str(token),
            ]
        )
        == 0
    )
    with Database(db_path) as db:
        shown = show_repository(db, REPOSITORY)["settings"]
    assert isinstance(shown, dict)
    assert (
        shown["pull_request"]
        == PullRequestSetting.from_mapping(
            {
                "forge": "gitea",
                "api_url": "https://git.example.org/api/v1",
                "project": PROJECT,
                "token_file": str(token),
            }
        ).public()
    )
    assert TOKEN not in capsys.readouterr().out
    assert main([*common, "k2", "--forge-project", PROJECT]) != 0
    assert "PULL_REQUEST_SETTING_INVALID" in capsys.readouterr().err
    assert main([*common, "k3", "--no-pull-requests"]) == 0
    with Database(db_path) as db:
        assert "pull_request" not in show_repository(db, REPOSITORY)["settings"]  # type: ignore[operator]
        assert verify_log(db).intact


@pytest.mark.git_servers
def test_a_write_through_a_git_server_is_proposed_with_the_remotes_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, http_git_server: HttpServer
) -> None:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    bare, base = make_repository(tmp_path / "served" / "acme")
    serve(bare, None)
    token_file = tmp_path / "remote-token"
    token_file.write_text(HTTP_TOKEN + "\n")
    db_path = tmp_path / "ledger.db"
    with Database(db_path) as db:
        add_remote_repository(
            db,
            REPOSITORY,
            http_git_server.url(bare),
            str(tmp_path / "mirror.git"),
            Credentials(token_file=str(token_file)),
        )
    with forge_server("github", token=HTTP_TOKEN, project=PROJECT) as forge:
        # The project comes from the remote's path, the token from its --token-file.
        pull_request = {"forge": "github", "api_url": forge.api_url}
        with Database(db_path) as db:
            change_repository_settings(
                db, REPOSITORY, {"pull_request": pull_request}, idempotency_key="prs-on"
            )
            assert show_repository(db, REPOSITORY)["settings"]["pull_request"] == {  # type: ignore[index]
                **pull_request,
                "project": PROJECT,
                "base_branch": None,
                "token_file": None,
            }
        verified_proposal(db_path, "task-h", binding("task-h", base), {"a.txt": "a\n"})
        with Database(db_path) as db:
            answer = governed_write(db, {"task_id": "task-h", "idempotency_key": "write-h"})
        assert forge.violations == []
    assert ref(bare, "refs/heads/agent/task-h") == answer["new_oid"]
    assert answer["pull_request"]["state"] == "OPENED"
    assert forge.requests[-1][4]["authorization"] == f"Bearer {HTTP_TOKEN}"
    assert HTTP_TOKEN.encode() not in db_path.read_bytes()
    with Database(db_path) as db:
        assert verify_log(db).intact


def test_the_api_answers_and_the_console_links_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    with (
        ApiServer(tmp_path / "ledger.db", role_tokens=True) as server,
        forge_server("gitea", token=TOKEN, project=PROJECT) as forge,
    ):
        governed = Governed(tmp_path, forge, db=server.db)
        governed.opt_in()
        governed.verified("task-i")
        written = server.client("owner").post(
            "/v1/tasks/task-i/governed-write", json={"idempotency_key": "write-i"}
        )
        assert written.status_code == 200, written.text
        opened = written.json()["pull_request"]
        assert (opened["state"], opened["number"]) == ("OPENED", 1)
        page = signed_in(server, "owner").get("/tasks/task-i")
        assert page.status_code == 200
        link = f'<a class="pull-request" href="{html.escape(opened["url"])}"'
        assert link in page.text and "gitea #1</a> into <code>main</code>" in page.text
        assert forge.violations == []


@pytest.mark.parametrize("kind", DESCRIBED)
def test_each_description_names_its_source_and_holds_all_it_references(kind: str) -> None:
    document = description(kind)
    source = document["x-excerpt-of"]
    assert {"repository", "commit", "path", "note"} <= set(source)
    # The whole source's digest where it was here whole; else its length, read in pages.
    assert len(source["commit"]) == 40 and "left_out" not in source
    assert (len(source.get("sha256", "")) == 64) != (source.get("characters", 0) > 0)
    # The paths the clients call, each operation with every entry it references.
    calls = {
        "github": {"/repos/{owner}/{repo}/pulls": {"get", "post"}},
        "gitlab": {"/api/v4/projects/{id}/merge_requests": {"get", "post"}},
        "gitea": {
            "/repos/{owner}/{repo}/pulls": {"get", "post"},
            "/repos/{owner}/{repo}/pulls/{base}/{head}": {"get"},
        },
    }[kind]
    assert {path: set(item) & {"get", "post"} for path, item in document["paths"].items()} == calls
    pending: list[Any] = [document["paths"]]
    followed: set[str] = set()
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "$ref" in node and node["$ref"] not in followed:
                followed.add(node["$ref"])
                # A KeyError names what the excerpt lacks.
                pending.append(resolve(document, {"$ref": node["$ref"]}))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def test_gitlabs_listed_merge_requests_are_held_to_their_definitions() -> None:
    forge = FakeForge("gitlab", TOKEN, PROJECT, Checker("gitlab", description("gitlab")))
    listing_path = f"/api/v4/projects/{quote(PROJECT, safe='')}/merge_requests"
    _, listing, _ = forge.checker.operation("GET", listing_path)
    listed = forge.document_of(PullRequest(1, "task/one", "main", "One", ""), listed=True)
    assert forge.checker.response_errors(listing, 200, [listed]) == []
    # Each nested definition is checked: a user, a milestone or references of the wrong shape.
    for name, wrong in (("author", "owner"), ("milestone", "v1"), ("references", "!1")):
        errors = forge.checker.response_errors(listing, 200, [{**listed, name: wrong}])
        assert errors == [f"answer 0/{name}: {wrong!r} is not of type 'object'"]
    nested = {**listed, "author": {"id": "one", "custom_attributes": [{"key": 1}]}}
    assert len(forge.checker.response_errors(listing, 200, [nested])) == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_on_each_engine_a_write_opens_its_request_once_and_verifies(
    tmp_path: Path, ledger_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    with forge_server("gitea", token=TOKEN, project=PROJECT) as forge:
        governed = Governed(tmp_path, forge, db=ledger_target)
        governed.opt_in()
        governed.verified("task-j")
        assert governed.write("task-j", "write-j")["pull_request"]["number"] == 1
        again = governed.write("task-j", "write-j")["pull_request"]
        assert again["idempotent"] is True and len(forge.created()) == 1
        assert forge.violations == []
    with Database(ledger_target) as db:
        assert verify_log(db).intact
        row = db.read(lambda conn: repository_row(conn, REPOSITORY))
    assert row is not None and row.settings().pull_request() is not None


def test_an_answer_that_is_no_web_link_is_not_taken(governed: Governed) -> None:
    # A link the console would show: only an http(s) address is taken from the forge.
    governed.forge.answered_url = "javascript:alert(document.cookie)"
    governed.verified("task-k")
    failed = governed.write("task-k", "write-k")["pull_request"]
    assert (failed["state"], failed["code"]) == ("FAILED", "PULL_REQUEST_FORGE_FAILED")
    assert "javascript:" not in str(failed)
