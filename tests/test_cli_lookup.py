"""What the command line finds, or says it cannot: a `--db` that names no ledger is
`DATABASE_NOT_FOUND` (only `init` creates one), and an id that names nothing is `TASK_NOT_FOUND`
or `RUN_NOT_FOUND`, never an empty answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aios_ledger.shell.cli import main
from legacy_fixtures import dump

TOKEN = "lookup-token-0123456789"

# Every command that opens the ledger, with arguments it accepts.
LEDGER_COMMANDS: list[list[str]] = [
    ["migrate"],
    ["migrate", "--status"],
    ["status"],
    ["head"],
    ["verify"],
    ["export", "--all"],
    ["expire-leases"],
    ["task", "list"],
    ["task", "show", "t1"],
    ["events", "t1"],
    ["aux", "list"],
    ["aux", "show", "a1"],
    ["run", "create", "s1", "prompt"],
    ["run", "evidence", "s1", "r1"],
    ["claim", "--json", "{request}"],
    ["binding", "put", "{request}"],
    ["project", "t1", "--request", "{request}"],
    ["review", "--as", "r1", "--exec", "true"],
    ["worker", "--agent-id", "w", "--exec", "true", "--once"],
]


def _argv(command: list[str], request: Path) -> list[str]:
    return [part.replace("{request}", str(request)) for part in command]


@pytest.mark.parametrize("command", LEDGER_COMMANDS, ids=" ".join)
def test_a_missing_database_is_not_found_and_never_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    request = tmp_path / "request.json"
    request.write_text('{"agent_id": "w", "capabilities": [], "lease_seconds": 5}')
    typo = tmp_path / "ledgr.db"
    assert main(["--db", str(typo), *_argv(command, request)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"DATABASE_NOT_FOUND: {str(typo)!r} does not exist"), err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["request.json"]


def test_a_missing_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-dir"
    for command in (["init"], ["status"]):
        assert main(["--db", str(missing / "ledger.db"), *command]) == 1
        err = capsys.readouterr().err
        assert err.startswith("DATABASE_NOT_FOUND: "), err
        assert f"the directory {str(missing)!r} does not exist" in err
    assert not missing.exists()


def test_init_creates_and_then_every_command_finds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIOS_LEDGER_DB", raising=False)
    assert main(["status", "--json"]) == 1
    assert capsys.readouterr().err.startswith("DATABASE_NOT_FOUND: 'aios-ledger.db'")
    assert main(["init"]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 0


@pytest.fixture
def ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = tmp_path / "ledger.db"
    assert main(["--db", str(db), "init"]) == 0
    create = tmp_path / "create.json"
    create.write_text(
        json.dumps(
            {"idempotency_key": "c1", "task": {"task_id": "t1", "goal": "g", "instructions": "i"}}
        )
    )
    assert main(["--db", str(db), "task", "create", "--json", str(create)]) == 0
    assert main(["--db", str(db), "run", "create", "s1", "prompt", "--run-id", "r1"]) == 0
    capsys.readouterr()
    return db


def _request(tmp_path: Path, body: object) -> str:
    path = tmp_path / f"request-{abs(hash(json.dumps(body)))}.json"
    path.write_text(json.dumps(body))
    return str(path)


@pytest.mark.parametrize(
    ("command", "body", "code"),
    [
        (["events", "nope"], None, "TASK_NOT_FOUND"),
        (["task", "show", "nope"], None, "TASK_NOT_FOUND"),
        (["export", "--task", "nope"], None, "TASK_NOT_FOUND"),
        (
            ["claim", "--json"],
            {"agent_id": "w", "capabilities": [], "lease_seconds": 5, "task_id": "nope"},
            "TASK_NOT_FOUND",
        ),
        (
            ["heartbeat", "--json"],
            {"task_id": "nope", "lease_token": TOKEN, "lease_seconds": 5},
            "TASK_NOT_FOUND",
        ),
        (
            ["submit", "--json"],
            {"task_id": "nope", "lease_token": TOKEN, "result": {}, "idempotency_key": "s"},
            "TASK_NOT_FOUND",
        ),
        (
            ["task", "verify", "--json"],
            {"task_id": "nope", "decision": "SUCCEEDED", "reason": "r", "idempotency_key": "v"},
            "TASK_NOT_FOUND",
        ),
        (
            ["cancel", "--json"],
            {"task_id": "nope", "reason": "r", "idempotency_key": "c"},
            "TASK_NOT_FOUND",
        ),
        (["run", "append", "nope", "note"], None, "RUN_NOT_FOUND"),
        (["run", "evidence", "s1", "nope"], None, "RUN_NOT_FOUND"),
        (["aux", "list", "--run", "nope"], None, "RUN_NOT_FOUND"),
        (["aux", "show", "nope"], None, "RUN_NOT_FOUND"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_an_unknown_id_is_not_found(
    ledger: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    body: object,
    code: str,
) -> None:
    argv = [*command, _request(tmp_path, body)] if body is not None else command
    before = dump(ledger)
    assert main(["--db", str(ledger), *argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{code}: "), captured.err
    assert "'nope'" in captured.err
    assert dump(ledger) == before


def test_known_ids_still_answer(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(ledger), "events", "t1"]) == 0
    assert [e["event_type"] for e in json.loads(capsys.readouterr().out)] == ["TASK_CREATED"]
    assert main(["--db", str(ledger), "aux", "list", "--run", "r1"]) == 0
    assert json.loads(capsys.readouterr().out) == []
