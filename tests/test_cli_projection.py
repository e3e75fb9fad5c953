"""The command line of the foundation: JSON out, `CODE: detail` on stderr, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell import AUTHORIZATION_ENV
from aios_ledger.shell.cli import main
from cli_runner import run_cli
from legacy_fixtures import (
    OWNER,
    TASK,
    binding,
    captured_database,
    dump,
    legacy_database,
    projection_mapping,
    recovery_mapping,
)

ROOT = Path(__file__).resolve().parents[1]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    output = json.loads(captured.out) if captured.out.strip() else None
    return code, output, captured.err


@pytest.fixture(autouse=True)
def owner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)


def write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def test_init_and_migrate_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "ledger.db")
    code, answer, _ = cli(capsys, "--db", db, "init")
    assert code == 0 and answer["applied"]
    code, status, _ = cli(capsys, "--db", db, "migrate", "--status")
    assert code == 0 and status["pending"] == []


def test_binding_put_then_project_with_the_built_in_resolver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = legacy_database(tmp_path / "ledger.db")
    bound = write(tmp_path / "binding.json", binding().public())
    code, registered, _ = cli(capsys, "--db", str(db), "binding", "put", bound)
    assert code == 0 and registered["idempotent"] is False
    code, again, _ = cli(capsys, "--db", str(db), "binding", "put", bound)
    assert code == 0 and again["idempotent"] is True
    request = write(tmp_path / "request.json", projection_mapping())
    code, projected, err = cli(capsys, "--db", str(db), "project", TASK, "--request", request)
    assert code == 0, err
    assert projected["revision"] == 2
    code, task, _ = cli(capsys, "--db", str(db), "task", "show", TASK)
    assert task["metadata"]["execution"]["execution_digest"] == projected["execution_digest"]
    code, events, _ = cli(capsys, "--db", str(db), "events", TASK)
    assert [event["event_type"] for event in events] == [
        "TASK_CREATED",
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
    ]


def test_binding_conflict_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = legacy_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "binding", "put", write(tmp_path / "a.json", binding().public()))
    other = write(tmp_path / "b.json", binding(generation=2).public())
    before = dump(db)
    code, _, err = cli(capsys, "--db", str(db), "binding", "put", other)
    assert code == 1 and err.startswith("GOVERNED_BINDING_CONFLICT: ")
    assert dump(db) == before


def test_recovery_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = captured_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "binding", "put", write(tmp_path / "b.json", binding().public()))
    request = write(tmp_path / "r.json", recovery_mapping())
    code, answer, err = cli(
        capsys, "--db", str(db), "project", TASK, "--from-source-capture", "--request", request
    )
    assert code == 0, err
    assert answer["recovery_from_source_capture"] is True and answer["revision"] == 6


@pytest.mark.parametrize(
    ("argv", "code", "prefix"),
    [
        (["task", "show", "missing"], 1, "TASK_NOT_FOUND: "),
        (["project", TASK, "--request", "/nonexistent/request.json"], 1, "INPUT_UNREADABLE: "),
        (["no-such-command"], 2, "USAGE_INVALID: "),
        ([], 2, "USAGE_INVALID: "),
    ],
)
def test_refusals_print_a_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, prefix: str
) -> None:
    db = legacy_database(tmp_path / "ledger.db")
    exit_code, output, err = cli(capsys, "--db", str(db), *argv)
    assert (exit_code, output) == (code, None)
    assert err.startswith(prefix)


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"expected_status": "QUEUED"}', b"\xff\xfe", b"{" * 100000],
)
def test_bad_request_files_are_refused_with_the_database_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    db = legacy_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "init")
    before = dump(db)
    request = tmp_path / "request.json"
    request.write_bytes(content)
    code, _, err = cli(capsys, "--db", str(db), "project", TASK, "--request", str(request))
    assert code == 1
    assert err.split(":")[0] in {"JSON_INVALID", "JSON_NOT_OBJECT", "FIELDS_INVALID"}
    assert dump(db) == before


def test_console_script_uses_the_environment_database(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    answer = run_cli("init", env={"AIOS_LEDGER_DB": str(db), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["database"] == str(db)
    assert db.exists()


def _database_files(db: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in db.parent.glob(db.name + "*")}


def test_preview_shows_the_envelope_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = legacy_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "binding", "put", write(tmp_path / "b.json", binding().public()))
    request = write(tmp_path / "request.json", projection_mapping())
    before = _database_files(db)
    code, preview, err = cli(
        capsys, "--db", str(db), "project", TASK, "--request", request, "--preview"
    )
    assert (code, err) == (0, "")
    assert _database_files(db) == before  # byte for byte, the WAL too
    assert preview["would_project"] is True and preview["refusal"] is None
    assert preview["execution_digest"] == preview["envelope"]["execution_digest"]
    assert preview["execution_digest"].startswith("sha256:")  # the one form of a digest
    code, projected, _ = cli(capsys, "--db", str(db), "project", TASK, "--request", request)
    assert code == 0 and projected["execution_digest"] == preview["execution_digest"]
    code, task, _ = cli(capsys, "--db", str(db), "task", "show", TASK)
    assert task["metadata"]["execution"] == preview["envelope"]


def test_preview_names_the_refusal_and_still_shows_the_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The digest a request must expect is what a preview is for: a wrong one is refused, and
    the preview shows the right one."""
    db = legacy_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "binding", "put", write(tmp_path / "b.json", binding().public()))
    drifted = {**projection_mapping(), "expected_execution_digest": "sha256:" + "f" * 64}
    request = write(tmp_path / "request.json", drifted)
    before = _database_files(db)
    code, preview, err = cli(
        capsys, "--db", str(db), "project", TASK, "--request", request, "--preview"
    )
    assert code == 1 and err.startswith("EXECUTION_DIGEST_DRIFT: ")
    assert preview["would_project"] is False
    assert preview["refusal"]["code"] == "EXECUTION_DIGEST_DRIFT"
    assert preview["execution_digest"] == projection_mapping()["expected_execution_digest"]
    assert _database_files(db) == before


def test_preview_names_every_expected_value_so_a_request_built_from_it_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An owner who only knows the task id and the binding: every `expected_*` field of the
    draft is wrong, the preview says what each must be, and the draft with them projects."""
    db = legacy_database(tmp_path / "ledger.db")
    cli(capsys, "--db", str(db), "binding", "put", write(tmp_path / "b.json", binding().public()))
    right = projection_mapping()
    draft = {
        **right,
        "expected_metadata_sha256": "0" * 64,
        "expected_required_capabilities_sha256": "1" * 64,
        "expected_execution_digest": "sha256:" + "2" * 64,
    }
    code, preview, err = cli(
        capsys,
        "--db",
        str(db),
        "project",
        TASK,
        "--request",
        write(tmp_path / "draft.json", draft),
        "--preview",
    )
    assert code == 1 and err.startswith("METADATA_DIGEST_MISMATCH: ")
    expected = preview["expected"]
    assert expected == {key: value for key, value in right.items() if key.startswith("expected_")}
    request = write(tmp_path / "request.json", {**draft, **expected})
    code, projected, _ = cli(capsys, "--db", str(db), "project", TASK, "--request", request)
    assert code == 0 and projected["execution_digest"] == expected["expected_execution_digest"]
