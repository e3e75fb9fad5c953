"""`project TASK --pin`: the projection in one step, through `main(argv)`, on both engines.

It reads the task and its binding, shows what it authorizes, and applies the seed's request
pinned to what it read; a task that changes between the read and the write is refused by the
projection's own checks. The owner authorization id comes from `--authorization-id`, the seed's
environment variable or the config file, in that order."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.tasks.requests import PauseRequest, ResumeRequest
from aios_ledger.shell import AUTHORIZATION_ENV, TaskLedger
from aios_ledger.shell.cli import main
from aios_ledger.shell.config import CONFIG_ENV
from conftest import both_engines

pytest_generate_tests = both_engines

TASK = "widgets-notes"
JOB = "widgets-notes-job"
ADAPTER = "example"
BASE = "0123456789abcdef0123456789abcdef01234567"
OWNER = "owner-pin-0001"
PROJECTED = "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED"


def binding(job_id: str = JOB) -> dict[str, Any]:
    return {
        "task_id": TASK,
        "job_id": job_id,
        "repository": "acme/widgets",
        "base_oid": BASE,
        "expected_branch_oid": BASE,
        "target_branch": f"agent/{job_id}",
        "branch_mode": "CREATE_NEW",
        "generation": 1,
        "idempotency_key": f"bind-{job_id}",
    }


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    output = json.loads(captured.out) if captured.out.strip().startswith("{") else captured.out
    return code, output, captured.err


def write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


@pytest.fixture(autouse=True)
def no_ambient_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No authorization id, config file or database from the machine running the tests."""
    monkeypatch.chdir(tmp_path)
    for name in (AUTHORIZATION_ENV, CONFIG_ENV, "AIOS_LEDGER_DB"):
        monkeypatch.delenv(name, raising=False)


def bound_ledger(target: str, tmp_path: Path) -> str:
    """A ledger holding a fresh task (required capabilities `[]`, revision 1) and its binding."""
    assert main(["--db", target, "init"]) == 0
    task = {"task_id": TASK, "goal": "Write the notes", "instructions": "Draft NOTES.md."}
    created = write(tmp_path / "task.json", {"idempotency_key": "create", "task": task})
    assert main(["--db", target, "task", "create", "--json", created]) == 0
    assert main(["--db", target, "binding", "put", write(tmp_path / "b.json", binding())]) == 0
    return target


@pytest.fixture
def db(ledger_target: Path | str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The bound ledger on each engine: for what reads and writes the ledger."""
    target = bound_ledger(str(ledger_target), tmp_path)
    capsys.readouterr()
    return target


@pytest.fixture
def sqlite_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The bound ledger on SQLite: for what the command line decides before the ledger (where
    the owner authorization comes from, what the terminal shows), the same on every engine."""
    target = bound_ledger(str(tmp_path / "ledger.sqlite3"), tmp_path)
    capsys.readouterr()
    return target


def pin(db: str, *extra: str) -> list[str]:
    return ["--db", db, "project", TASK, "--pin", "--adapter", ADAPTER, *extra]


def events(db: str) -> list[str]:
    with TaskLedger(db) as ledger:
        return [event["event_type"] for event in ledger.events(TASK)]


class Terminal:
    """A stdin that says it is a terminal; `answer` runs when the owner is asked (the moment
    between the read and the write), then `reply` is the line read."""

    def __init__(self, reply: str, answer: Callable[[], None] = lambda: None) -> None:
        self.reply = reply
        self.answer = answer
        self.asked = 0

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        self.asked += 1
        self.answer()
        return self.reply


def as_terminal(monkeypatch: pytest.MonkeyPatch, stream: Any) -> None:
    monkeypatch.setattr(stream, "isatty", lambda: True)


# -- the projection in one step ----------------------------------------------------------------


def test_pin_projects_a_fresh_task_and_says_what_it_authorized(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, answer, err = cli(capsys, *pin(db, "--authorization-id", OWNER))
    assert (code, err) == (0, "")
    authorized, request, projection = answer["authorized"], answer["request"], answer["projection"]
    digest = projection["execution_digest"]
    assert {key: value for key, value in authorized.items() if key != "idempotency_key"} == {
        "task_id": TASK,
        "status": "QUEUED",
        "revision": 1,
        "attempt": 0,
        "job_id": JOB,
        "repository": "acme/widgets",
        "base_oid": BASE,
        "target_branch": f"agent/{JOB}",
        "branch_mode": "CREATE_NEW",
        "generation": 1,
        "capability": "agent.runtime.example",
        "capability_scope": ["agent.runtime.example"],
        "adapter": ADAPTER,
        "execution_digest": digest,
        "authorization_id": OWNER,
    }
    assert authorized["idempotency_key"] == request["idempotency_key"]
    assert request["idempotency_key"].startswith("pin-")
    assert (projection["revision"], projection["required_capabilities"]) == (
        2,
        ["agent.runtime.example"],
    )
    assert events(db) == ["TASK_CREATED", PROJECTED]
    code, task, _ = cli(capsys, "--db", db, "task", "show", TASK)
    assert task["metadata"]["execution"]["execution_digest"] == digest
    assert task["required_capabilities"] == ["agent.runtime.example"]


def test_the_pinned_request_is_exactly_what_the_full_form_preview_says_to_pin(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long form's preview names the `expected_*` values for the task as it stands; the
    pinned request carries exactly those, and applied as a request file (automation) it
    projects."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    before = events(db)
    code, pinned, err = cli(capsys, *pin(db, "--preview", "--json"))
    assert (code, err) == (0, "")
    assert pinned["preview"] is True and pinned["would_project"] is True
    assert pinned["refusal"] is None and events(db) == before  # a preview writes nothing
    draft = write(tmp_path / "draft.json", pinned["request"])
    code, full, _ = cli(capsys, "--db", db, "project", TASK, "--request", draft, "--preview")
    assert code == 0
    assert full["expected"] == {
        key: value for key, value in pinned["request"].items() if key.startswith("expected_")
    }
    code, projected, err = cli(capsys, "--db", db, "project", TASK, "--request", draft)
    assert (code, err) == (0, "")
    assert projected["execution_digest"] == pinned["authorized"]["execution_digest"]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [("pause and resume", "REVISION_CONFLICT"), ("claim", "TASK_ALREADY_CLAIMED")],
)
def test_a_task_that_changes_between_the_read_and_the_write_is_refused(
    db: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    change: str,
    refusal: str,
) -> None:
    """The owner is asked after the read; while the question is on screen the task moves. The
    pinned request then meets the projection's own checks under the write lock, which refuse
    it with the seed's code, and nothing is written."""

    def meanwhile() -> None:
        with TaskLedger(db) as ledger:
            if change == "claim":
                assert ledger.claim(agent_id="worker-1", capabilities=[], lease_seconds=60)
                return
            for move in (PauseRequest, ResumeRequest):
                ledger.apply(
                    move.from_mapping(
                        {"task_id": TASK, "reason": "hold", "idempotency_key": move.__name__}
                    )
                )

    terminal = Terminal("y\n", meanwhile)
    monkeypatch.setattr("sys.stdin", terminal)
    code, out, err = cli(capsys, *pin(db, "--authorization-id", OWNER))
    assert terminal.asked == 1
    assert code == 1 and out == ""
    asked, refused = err.rsplit("Project it? [y/N] ", 1)
    assert "revision 1" in asked and f"{TASK}" in asked  # what was read, shown before asking
    assert refused.startswith(f"{refusal}: "), refused
    assert PROJECTED not in events(db)
    with TaskLedger(db) as ledger:
        assert "execution" not in ledger.get(TASK)["metadata"]


def test_the_key_is_derived_from_what_is_pinned(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same read is the same request (applied twice, a replay); a request that pins
    anything else (here the reason) gets another key, so a refused one never holds back the
    next."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    _, first, _ = cli(capsys, *pin(db, "--preview"))
    _, again, _ = cli(capsys, *pin(db, "--preview"))
    _, other, _ = cli(capsys, *pin(db, "--preview", "--reason", "another reason"))
    assert first["request"] == again["request"]
    assert other["request"]["idempotency_key"] != first["request"]["idempotency_key"]
    request = write(tmp_path / "request.json", first["request"])
    answers = [cli(capsys, "--db", db, "project", TASK, "--request", request)[1] for _ in "12"]
    assert [answer["idempotent"] for answer in answers] == [False, True]
    _, named, _ = cli(capsys, *pin(db, "--preview", "--idempotency-key", "mine"))
    assert named == ""  # projected already: refused, with nothing on stdout


def test_declining_on_a_terminal_writes_nothing(
    sqlite_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("\n"))
    before = events(sqlite_db)
    code, out, err = cli(capsys, *pin(sqlite_db, "--authorization-id", OWNER))
    assert code == 1 and out == ""
    assert err.splitlines()[-1].endswith(
        "PROJECTION_NOT_CONFIRMED: the owner did not confirm: "
        "nothing was written (--yes projects without asking)"
    )
    assert events(sqlite_db) == before


def test_yes_never_asks_and_a_stdin_that_is_no_terminal_is_never_read(
    sqlite_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal("n\n")
    monkeypatch.setattr("sys.stdin", terminal)
    code, answer, _ = cli(capsys, *pin(sqlite_db, "--authorization-id", OWNER, "--yes"))
    assert code == 0 and answer["projection"]["revision"] == 2
    assert terminal.asked == 0


def test_on_a_terminal_the_owner_reads_what_is_authorized_then_what_was_done(
    sqlite_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    as_terminal(monkeypatch, sys.stdout)
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = cli(capsys, *pin(sqlite_db, "--authorization-id", OWNER))
    assert (code, err) == (0, "")
    shown = out.splitlines()
    (digest,) = [line.split()[1] for line in shown if line.startswith("  envelope ")]
    assert shown[0] == (
        f"Project task {TASK} (as read: QUEUED, revision 1, attempt 0) under this envelope:"
    )
    assert [line.split(None, 1) for line in shown[1:9]] == [
        ["job", JOB],
        ["repository", "acme/widgets"],
        ["base", BASE],
        ["branch", f"agent/{JOB} (CREATE_NEW, generation 1)"],
        ["capability", "agent.runtime.example"],
        ["adapter", ADAPTER],
        ["envelope", digest],
        ["authorization", OWNER],
    ]
    assert digest.startswith("sha256:") and len(digest) == 71  # whole, never cut
    assert shown[-1] == (
        f"Project it? [y/N] Projected {TASK}: revision 2, envelope {digest}. "
        "Workers offering agent.runtime.example may claim it."
    )


# -- the owner authorization id ----------------------------------------------------------------


def config_file(tmp_path: Path, authorization_id: str) -> str:
    path = tmp_path / "ledger.toml"
    path.write_text(f'[projection]\nauthorization_id = "{authorization_id}"\n')
    return str(path)


@pytest.mark.parametrize(
    ("flag", "env", "config", "chosen"),
    [
        ("from-flag", None, None, "from-flag"),
        (None, "from-env", None, "from-env"),
        (None, None, "from-config", "from-config"),
        ("from-flag", "from-env", "from-config", "from-flag"),
        (None, "from-env", "from-config", "from-env"),
        ("from-flag", None, "from-config", "from-flag"),
    ],
)
def test_the_authorization_id_is_the_flag_then_the_environment_then_the_config_file(
    sqlite_db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    env: str | None,
    config: str | None,
    chosen: str,
) -> None:
    argv = ["--config", config_file(tmp_path, config)] if config else []
    argv += pin(sqlite_db, "--yes", *(["--authorization-id", flag] if flag else []))
    if env:
        monkeypatch.setenv(AUTHORIZATION_ENV, env)
    code, answer, err = cli(capsys, *argv)
    assert (code, err) == (0, "")
    assert answer["request"]["authorization_id"] == chosen
    assert answer["authorized"]["authorization_id"] == chosen
    with TaskLedger(sqlite_db) as ledger:
        (event,) = [e for e in ledger.events(TASK) if e["event_type"] == PROJECTED]
    assert event["payload"]["authorization_id"] == chosen


def test_a_request_file_is_held_to_the_authorization_id_of_the_config_file(
    sqlite_db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The full form runs under the same owner authorization: the config file's, here."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    code, pinned, _ = cli(capsys, *pin(sqlite_db, "--preview"))
    monkeypatch.delenv(AUTHORIZATION_ENV)
    request = write(tmp_path / "request.json", pinned["request"])
    other = config_file(tmp_path, "someone-else")
    code, _, err = cli(
        capsys, "--config", other, "--db", sqlite_db, "project", TASK, "--request", request
    )
    assert code == 1 and err.startswith("AUTHORIZATION_DENIED: ")
    same = config_file(tmp_path, OWNER)
    # The refused attempt is recorded under its key, which replays the refusal; the owner's
    # next attempt is a new request.
    code, _, err = cli(
        capsys, "--config", same, "--db", sqlite_db, "project", TASK, "--request", request
    )
    assert code == 1 and err.startswith("AUTHORIZATION_DENIED: ")
    again = {**pinned["request"], "idempotency_key": "owner-projects-again"}
    request = write(tmp_path / "again.json", again)
    code, answer, err = cli(
        capsys, "--config", same, "--db", sqlite_db, "project", TASK, "--request", request
    )
    assert (code, err) == (0, "") and answer["revision"] == 2


@pytest.mark.parametrize("form", ["pin", "request"])
def test_a_missing_authorization_id_is_refused_naming_where_to_give_it(
    sqlite_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    before = events(sqlite_db)
    request = {
        "expected_status": "QUEUED",
        "expected_revision": 1,
        "expected_attempt": 0,
        "expected_metadata_sha256": "0" * 64,
        "expected_required_capabilities_sha256": "0" * 64,
        "expected_job_id": JOB,
        "expected_execution_digest": "sha256:" + "0" * 64,
        "required_capability": "agent.runtime.example",
        "adapter": ADAPTER,
        "authorization_id": OWNER,
        "idempotency_key": "by-hand",
        "reason": "automation",
    }
    argv = (
        pin(sqlite_db)
        if form == "pin"
        else ["--db", sqlite_db, "project", TASK, "--request", write(tmp_path / "r.json", request)]
    )
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith("AUTHORIZATION_DENIED: no owner authorization id is configured: ")
    for source in ("--authorization-id", AUTHORIZATION_ENV, "[projection]"):
        assert source in err
    assert events(sqlite_db) == before


def test_an_authorization_id_that_is_no_identifier_is_a_usage_mistake(
    sqlite_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, *pin(sqlite_db, "--authorization-id", "has space"))
    assert code == 2 and err.startswith("USAGE_INVALID: argument --authorization-id: ")


# -- which binding, and the usage of the two forms ---------------------------------------------


def test_the_job_is_the_tasks_one_binding_or_the_one_named(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = write(tmp_path / "second.json", binding("widgets-notes-2"))
    assert main(["--db", db, "binding", "put", second]) == 0
    capsys.readouterr()
    code, _, err = cli(capsys, *pin(db, "--authorization-id", OWNER))
    assert code == 1 and err.startswith("GOVERNED_BINDING_AMBIGUOUS: ")
    assert JOB in err and "widgets-notes-2" in err
    code, answer, err = cli(
        capsys, *pin(db, "--authorization-id", OWNER, "--job", "widgets-notes-2")
    )
    assert (code, err) == (0, "")
    assert answer["authorized"]["target_branch"] == "agent/widgets-notes-2"


def test_a_task_without_a_binding_is_refused_before_anything_is_resolved(
    ledger_target: Path | str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = str(ledger_target)
    main(["--db", target, "init"])
    task = {"task_id": TASK, "goal": "g", "instructions": "i"}
    main(
        [
            "--db",
            target,
            "task",
            "create",
            "--json",
            write(tmp_path / "t.json", {"idempotency_key": "c", "task": task}),
        ]
    )
    capsys.readouterr()
    code, _, err = cli(capsys, *pin(target, "--authorization-id", OWNER))
    assert code == 1 and err.startswith("GOVERNED_BINDING_NOT_FOUND: ")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["project", TASK], "one of the arguments --pin --request is required"),
        (["project", TASK, "--pin"], "--pin needs --adapter NAME"),
        (
            ["project", TASK, "--pin", "--adapter", ADAPTER, "--request", "r.json"],
            "not allowed with argument --pin",
        ),
        (
            ["project", TASK, "--pin", "--adapter", ADAPTER, "--from-source-capture"],
            "a recovery takes --request",
        ),
        (["project", TASK, "--request", "r.json", "--adapter", ADAPTER], "--adapter go with --pin"),
        (["project", TASK, "--request", "r.json", "--yes", "--job", "j"], "--job, --yes go with"),
    ],
)
def test_mixing_the_two_forms_is_a_usage_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    code, out, err = cli(capsys, "--db", str(tmp_path / "none.db"), *argv)
    assert (code, out) == (2, "")
    assert err.startswith("USAGE_INVALID: ") and said in err, err
