"""The config file (`--config`, `$AIOS_LEDGER_CONFIG`, `./aios-ledger.toml`): flags over the
file over the defaults, unknown keys and wrong types refused by name; and logging, as text or
one JSON object per line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.cli import main
from cli_runner import CliResult, run_cli
from legacy_fixtures import dump

AGENT = (
    f'{sys.executable} -c "import json, sys; json.load(sys.stdin); '
    "print(json.dumps({'status': 'SUCCEEDED'}))\""
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIOS_LEDGER_DB", raising=False)
    monkeypatch.delenv("AIOS_LEDGER_CONFIG", raising=False)
    monkeypatch.delenv("AIOS_LEDGER_MIGRATE", raising=False)
    return tmp_path


def _ledger(path: Path, *task_ids: str) -> None:
    with TaskLedger(path) as ledger:
        for task_id in task_ids:
            ledger.create_task(
                {"task_id": task_id, "goal": "g", "instructions": "i"}, idempotency_key=task_id
            )


def test_the_file_in_the_current_directory_names_the_database(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "data").mkdir()
    _ledger(workdir / "data" / "ledger.db", "t1")
    (workdir / "aios-ledger.toml").write_text('[database]\npath = "data/ledger.db"\n')
    assert main(["task", "list"]) == 0
    assert [task["task_id"] for task in json.loads(capsys.readouterr().out)] == ["t1"]
    assert not (workdir / "aios-ledger.db").exists()


def test_a_relative_path_is_the_files_own(
    workdir: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path_factory.mktemp("etc")
    _ledger(elsewhere / "ledger.db", "t-far")
    (elsewhere / "ledger.toml").write_text('[database]\npath = "ledger.db"\n')
    assert main(["--config", str(elsewhere / "ledger.toml"), "task", "list"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["task_id"] == "t-far"


def test_the_variable_then_the_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c"):
        _ledger(workdir / f"{name}.db", f"t-{name}")
        (workdir / f"{name}.toml").write_text(f'[database]\npath = "{name}.db"\n')
    (workdir / "aios-ledger.toml").write_text('[database]\npath = "a.db"\n')
    monkeypatch.setenv("AIOS_LEDGER_CONFIG", str(workdir / "b.toml"))
    assert main(["task", "list"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["task_id"] == "t-b"
    assert main(["--config", "c.toml", "task", "list"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["task_id"] == "t-c"
    assert main(["--config", "c.toml", "--db", "a.db", "task", "list"]) == 0  # the flag wins
    assert json.loads(capsys.readouterr().out)[0]["task_id"] == "t-a"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[databse]\npath = 'x.db'\n", "file: unknown ['databse']"),
        ("[worker]\nlease_secnds = 5\n", "worker: unknown ['lease_secnds']"),
        ("[worker]\nlease_seconds = '60'\n", "worker.lease_seconds: must be an integer"),
        ("[worker]\nlease_seconds = 0\n", "worker.lease_seconds: must be between 1 and"),
        ("[worker]\ntimeout = -1\n", "worker.timeout: must be positive"),
        ("[worker]\ncapabilities = 'python'\n", "worker.capabilities: must be a list"),
        ("[worker]\nconcurency = 4\n", "worker: unknown ['concurency']"),
        ("[worker]\nconcurrency = 0\n", "worker.concurrency: must be between 1 and 256"),
        ("[review]\nlimit = 1.5\n", "review.limit: must be an integer"),
        ("[review]\nmax_attempts = 0\n", "review.max_attempts: must be between 1 and 100"),
        ("[database]\nsynchronous = 'OFF'\n", "database.synchronous: must be one of"),
        ("[database]\nmigrate = 'no'\n", "database.migrate: must be true or false"),
        ("database = 1\n", "database: must be a JSON object"),
        ("[worker\n", "not TOML"),
    ],
)
def test_a_bad_file_is_refused_by_name(
    workdir: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    _ledger(workdir / "aios-ledger.db")
    before = dump(workdir / "aios-ledger.db")
    (workdir / "bad.toml").write_text(text)
    assert main(["--config", "bad.toml", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("CONFIG_INVALID: bad.toml: "), err
    assert named in err, err
    assert dump(workdir / "aios-ledger.db") == before


def test_a_named_file_must_exist(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["--config", "missing.toml", "status"]) == 1
    assert capsys.readouterr().err.startswith("CONFIG_NOT_FOUND: --config names 'missing.toml'")
    monkeypatch.setenv("AIOS_LEDGER_CONFIG", "gone.toml")
    assert main(["status"]) == 1
    assert capsys.readouterr().err.startswith("CONFIG_NOT_FOUND: $AIOS_LEDGER_CONFIG names")


def test_commands_without_a_ledger_never_read_the_file(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "aios-ledger.toml").write_text("not toml at all [")
    assert main(["schema", "claim"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "ClaimRequest"


def test_migrate_false_in_the_file_leaves_the_schema_to_the_dba(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "aios-ledger.toml").write_text("[database]\nmigrate = false\n")
    (workdir / "aios-ledger.db").write_bytes(b"")  # a file that is no ledger yet
    assert main(["task", "list"]) == 1
    assert capsys.readouterr().err.startswith("SCHEMA_TOO_OLD: ")
    assert (workdir / "aios-ledger.db").read_bytes() == b""


def _cli(*argv: str, cwd: Path) -> CliResult:
    return run_cli(*argv, cwd=cwd, env={"PATH": "/usr/bin:/bin"})


def test_the_worker_takes_its_settings_from_the_file_and_flags_override(workdir: Path) -> None:
    _ledger(workdir / "aios-ledger.db", "t1", "t2", "t3")
    (workdir / "aios-ledger.toml").write_text(
        "[worker]\n"
        'agent_id = "file-agent"\n'
        f"exec = {json.dumps(AGENT)}\n"
        "lease_seconds = 90\n"
        "max_tasks = 1\n"
        "poll_min = 1\n"
    )
    first = _cli("worker", "--until-empty", cwd=workdir)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["agent_id"] == "file-agent"
    assert len(json.loads(first.stdout)["tasks"]) == 1  # max_tasks from the file
    second = _cli(
        "worker", "--until-empty", "--agent-id", "flag-agent", "--max-tasks", "5", cwd=workdir
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["agent_id"] == "flag-agent"
    assert len(json.loads(second.stdout)["tasks"]) == 2
    with TaskLedger(workdir / "aios-ledger.db") as ledger:
        claims = [e for e in ledger.events("t1") if e["event_type"] == "TASK_CLAIMED"]
    assert claims[0]["agent_id"] == "file-agent"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["worker", "--exec", "true"], "--agent-id is required (or [worker] agent_id"),
        (["worker", "--agent-id", "w"], "--exec is required (or [worker] exec"),
        (["review"], "--exec is required (or [review] exec"),
        (["worker", "--agent-id", "w", "--exec", "true", "--lease-seconds", "0"], "between 1"),
        (["worker", "--agent-id", "w", "--exec", "true", "--grace", "-1"], "not be negative"),
        (["worker", "--agent-id", "w", "--exec", "true", "--concurrency", "257"], "between 1"),
        (["worker", "--agent-id", "w", "--exec", "true", "--capability", "a b"], "capability"),
        (["review", "--exec", "true", "--timeout", "inf"], "at most"),
    ],
)
def test_missing_or_bad_worker_settings_are_usage_mistakes(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    _ledger(workdir / "aios-ledger.db")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("USAGE_INVALID: ") and message in err, err


def test_setting_flags_show_their_default_and_key(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert "(default: 30; config file: [worker] lease_seconds)" in helped
    assert "(default: 10.0; config file: [worker] grace)" in helped


def test_logs_as_text_by_default_and_as_json_lines_on_request(workdir: Path) -> None:
    _ledger(workdir / "aios-ledger.db", "t1", "t2", "t3")
    worker = ["worker", "--agent-id", "w", "--exec", AGENT, "--once"]
    text = _cli(*worker, cwd=workdir)
    assert text.returncode == 0, text.stderr
    assert "INFO aios_ledger.worker: worker w: task t1 attempt 1: started" in text.stderr
    quiet = _cli("--log-level", "warning", *worker, cwd=workdir)
    assert quiet.returncode == 0 and quiet.stderr == ""
    logged = _cli("--log-format", "json", *worker, cwd=workdir)
    assert logged.returncode == 0, logged.stderr
    lines = [json.loads(line) for line in logged.stderr.splitlines()]
    started = next(line for line in lines if line["message"].endswith("started"))
    assert started["level"] == "INFO" and started["logger"] == "aios_ledger.worker"
    assert (started["task_id"], started["agent_id"], started["attempt"]) == ("t3", "w", 1)
    assert started["time"].endswith("Z")
    done = next(line for line in lines if line.get("outcome"))
    assert done["outcome"] == "submitted" and isinstance(done["seconds"], float)


def test_other_commands_log_warnings_only(workdir: Path) -> None:
    _ledger(workdir / "aios-ledger.db", "t1")
    listed = _cli("task", "list", cwd=workdir)
    assert listed.returncode == 0 and listed.stderr == ""
