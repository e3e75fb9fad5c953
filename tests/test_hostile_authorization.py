"""Nobody gets around the owner authorization: both projection flows, through the library and
the command line, refuse as AUTHORIZATION_DENIED, change nothing but the sealed record of the
refused attempt, call no resolver, and do not even replay an earlier answer, whenever the
configured authorization is missing, empty, whitespace, or not the one the request carries."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    ProjectionAnswer,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.shell.cli import main
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from cli_runner import run_cli
from conftest import both_engines
from legacy_fixtures import (
    OWNER,
    TASK,
    binding,
    captured_database,
    dump,
    legacy_database,
    on_engine,
    projection_mapping,
    recovery_mapping,
    resolver,
)

UNSET = None
# (configured authorization, authorization the request carries)
DENIED: list[tuple[str | None, str]] = [
    (UNSET, OWNER),
    ("", OWNER),
    ("   ", OWNER),
    ("\t\n ", OWNER),
    ("another-owner", OWNER),
    (OWNER + "-2", OWNER),
    (OWNER.upper(), OWNER),
    (OWNER, "someone-else"),
    (OWNER, OWNER[:-1]),
    (OWNER, OWNER + "0"),
    (OWNER, OWNER.upper()),
]
IDS = [f"env={configured!r}-request={carried!r}" for configured, carried in DENIED]


FLOWS = ("initial", "recovery")


pytest_generate_tests = both_engines


def _configure(monkeypatch: pytest.MonkeyPatch, configured: str | None) -> None:
    if configured is None:
        monkeypatch.delenv(AUTHORIZATION_ENV, raising=False)
    else:
        monkeypatch.setenv(AUTHORIZATION_ENV, configured)


def _database(flow: str, path: Path) -> Path:
    return legacy_database(path) if flow == "initial" else captured_database(path)


def _mapping(flow: str, carried: str) -> dict[str, Any]:
    if flow == "initial":
        return projection_mapping(authorization_id=carried)
    return recovery_mapping(authorization_id=carried)


def _project(flow: str, path: Path, carried: str, calls: list[str]) -> ProjectionAnswer:
    def counting(*args: Any) -> Any:
        calls.append(str(args[0]))
        return resolver(*args)

    store = InitialExecutionProjectionStore(path, counting)
    try:
        if flow == "initial":
            request = InitialExecutionProjectionRequest.from_mapping(_mapping(flow, carried))
            return store.project(TASK, request)
        recovery = SourceCaptureProjectionRecoveryRequest.from_mapping(_mapping(flow, carried))
        return store.project_from_source_capture(TASK, recovery)
    finally:
        store.close()


def _denied(work: Callable[[], object]) -> None:
    with pytest.raises(LedgerError) as refused:
        work()
    assert refused.value.code == "AUTHORIZATION_DENIED", refused.value


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize(("configured", "carried"), DENIED, ids=IDS)
def test_the_library_denies_and_writes_nothing(
    tmp_path: Path,
    ledger_target: Path,
    monkeypatch: pytest.MonkeyPatch,
    flow: str,
    configured: str | None,
    carried: str,
) -> None:
    path = on_engine(_database(flow, tmp_path / "ledger.db"), ledger_target)
    _configure(monkeypatch, OWNER)
    InitialExecutionProjectionStore(path, resolver).close()  # adopt the legacy database first
    before = dump(path)
    _configure(monkeypatch, configured)
    calls: list[str] = []
    _denied(lambda: _project(flow, path, carried, calls))
    assert calls == []
    assert refusals_recorded(before, dump(path)) == 1


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("configured", [UNSET, "", "  ", "another-owner"])
def test_a_replay_is_denied_too(
    tmp_path: Path,
    ledger_target: Path,
    monkeypatch: pytest.MonkeyPatch,
    flow: str,
    configured: str | None,
) -> None:
    """An earlier answer is not handed out again without the authorization."""
    path = on_engine(_database(flow, tmp_path / "ledger.db"), ledger_target)
    _configure(monkeypatch, OWNER)
    calls: list[str] = []
    first = _project(flow, path, OWNER, calls)
    assert first["revision"] > 1 and calls == [TASK]
    before = dump(path)
    _configure(monkeypatch, configured)
    _denied(lambda: _project(flow, path, OWNER, calls))
    assert calls == [TASK]
    assert dump(path) == before


# What a denied projection of a task that exists leaves: its sealed refusal (the event, its
# seal and Merkle leaf, the refusal's recorded answer for its key), nothing else.
REFUSAL_RECORD = (
    "events:",
    "event_seals:",
    "event_seal_rows:",
    "merkle_leaves:",
    "merkle_tree:",
    "task_idempotency:",
    "sqlite_sequence:",
)


def refusals_recorded(before: list[str], after: list[str]) -> int:
    """How many sealed refusals of AUTHORIZATION_DENIED `after` adds to `before`, failing on
    any other change."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    assert all(line.startswith(REFUSAL_RECORD) for line in added + removed), added + removed
    assert all(line.startswith(("merkle_tree:", "sqlite_sequence:")) for line in removed)
    events = [line for line in added if line.startswith("events:")]
    assert all(
        "TASK_INITIAL_EXECUTION_PROJECTION_REFUSED" in line and "AUTHORIZATION_DENIED" in line
        for line in events
    ), events
    return len(events)


def _cli_args(flow: str, path: Path, request: Path) -> list[str]:
    argv = ["--db", str(path), "project", TASK, "--request", str(request)]
    return argv + (["--from-source-capture"] if flow == "recovery" else [])


def _cli_database(flow: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: Path) -> Path:
    path: Path = on_engine(_database(flow, tmp_path / "ledger.db"), target)
    bound = tmp_path / "binding.json"
    bound.write_text(json.dumps(binding().public()))
    _configure(monkeypatch, OWNER)
    assert main(["--db", str(path), "binding", "put", str(bound)]) == 0
    return path


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize(("configured", "carried"), DENIED, ids=IDS)
def test_the_command_line_denies_and_writes_nothing(
    tmp_path: Path,
    ledger_target: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flow: str,
    configured: str | None,
    carried: str,
) -> None:
    path = _cli_database(flow, tmp_path, monkeypatch, ledger_target)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(_mapping(flow, carried)))
    capsys.readouterr()
    before = dump(path)
    _configure(monkeypatch, configured)
    assert main(_cli_args(flow, path, request)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("AUTHORIZATION_DENIED: ")
    # Denied by the store (an authorization configured, another one carried), the attempt is
    # recorded; with none configured, the command line refuses before it opens the store.
    recorded = refusals_recorded(before, dump(path))
    assert recorded == (0 if configured is None or not configured.strip() else 1)


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("configured", [UNSET, " ", "another-owner"])
def test_a_command_line_whose_environment_lacks_the_authorization_is_denied(
    tmp_path: Path,
    ledger_target: Path,
    monkeypatch: pytest.MonkeyPatch,
    flow: str,
    configured: str | None,
) -> None:
    path = _cli_database(flow, tmp_path, monkeypatch, ledger_target)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(_mapping(flow, OWNER)))
    before = dump(path)
    env = {key: value for key, value in os.environ.items() if key != AUTHORIZATION_ENV}
    if configured is not None:
        env[AUTHORIZATION_ENV] = configured
    done = run_cli(*_cli_args(flow, path, request), env=env)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("AUTHORIZATION_DENIED: ") and "Traceback" not in done.stderr
    recorded = refusals_recorded(before, dump(path))
    assert recorded == (0 if configured is None or not configured.strip() else 1)
