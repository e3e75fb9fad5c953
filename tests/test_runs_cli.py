"""The command line for runs and auxiliary runs: run create|append|evidence, aux list|show."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import JsonValue
from aios_ledger.core.auxiliary import AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
from aios_ledger.shell import AuxiliaryRunContext, AuxiliaryRunService, RunEvidenceReader, RunStore
from aios_ledger.shell.cli import main
from cli_runner import run_cli


def cli(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, Any, str]:
    code = main(["--db", str(db), *args])
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.strip() else None
    return code, out, captured.err


def test_run_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.db"
    assert cli(capsys, db, "init")[0] == 0
    code, run, _ = cli(capsys, db, "run", "create", "s-1", "review it", "--run-id", "r-1")
    assert code == 0
    assert (run["run_id"], run["session_id"], run["event_count"]) == ("r-1", "s-1", 0)
    payload = tmp_path / "payload.json"
    payload.write_text('{"tool": "grep"}')
    code, event, _ = cli(capsys, db, "run", "append", "r-1", "tool_call", "--payload", str(payload))
    assert (code, event["seq"], event["payload"]) == (0, 1, {"tool": "grep"})
    code, event, _ = cli(capsys, db, "run", "append", "r-1", "note")
    assert (code, event["seq"], event["payload"]) == (0, 2, None)
    code, evidence, _ = cli(capsys, db, "run", "evidence", "s-1", "r-1", "--max-events", "1")
    assert code == 0
    assert evidence["truncated"] is True
    assert [e["seq"] for e in evidence["events"]] == [1]
    with RunStore(db) as runs:
        again = RunEvidenceReader(runs).read(
            EvidenceReadRequest(ExecutionTarget("s-1", "r-1"), max_events=1)
        )
    assert evidence["snapshot_digest"] == again.snapshot_digest


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", "evidence", "s-other", "r-1"], "TARGET_MISMATCH"),
        (["run", "evidence", "s-1", "r-missing"], "RUN_NOT_FOUND"),
        (["run", "evidence", "s-1", "r-1", "--max-bytes", "0"], "FIELDS_INVALID"),
        (["run", "append", "r-missing", "note"], "RUN_NOT_FOUND"),
        (["run", "create", "s-1", "another prompt", "--run-id", "r-1"], "RUN_CONFLICT"),
        (["aux", "show", "aux-missing"], "RUN_NOT_FOUND"),
        (["aux", "list", "--limit", "0"], "FIELDS_INVALID"),
        (["aux", "list", "--state", "DONE"], "USAGE_INVALID"),
    ],
)
def test_refusals_print_their_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: str
) -> None:
    db = tmp_path / "ledger.db"
    cli(capsys, db, "init")
    cli(capsys, db, "run", "create", "s-1", "prompt", "--run-id", "r-1")
    status, out, err = cli(capsys, db, *args)
    assert status != 0
    assert out is None
    assert err.startswith(f"{code}: ") or err.startswith(code)


class Answer:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        return {"verdict": "fine"}


def test_aux_list_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.db"
    with RunStore(db) as runs:
        runs.create_run("s-1", "prompt", run_id="r-1")
        evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(ExecutionTarget("s-1", "r-1")))

    async def spawn() -> None:
        service = AuxiliaryRunService(Answer(), db)
        for aux_id in ("aux-a", "aux-b"):
            spec = AuxiliaryRunSpec(
                ExecutionFrame.root(evidence.target), "reviewer", "review", evidence.snapshot_digest
            ).with_id(aux_id)
            await (await service.spawn(spec, evidence)).wait()
        service.close()

    asyncio.run(spawn())
    code, listed, _ = cli(capsys, db, "aux", "list")
    assert code == 0
    assert [item["id"] for item in listed] == ["aux-a", "aux-b"]
    assert {item["state"] for item in listed} == {"COMPLETED"}
    code, listed, _ = cli(capsys, db, "aux", "list", "--state", "FAILED")
    assert listed == []
    code, listed, _ = cli(capsys, db, "aux", "list", "--session", "s-1", "--run", "r-1")
    assert len(listed) == 2
    code, shown, _ = cli(capsys, db, "aux", "show", "aux-a")
    assert code == 0
    assert shown["state"] == "COMPLETED"
    assert shown["output"] == {"verdict": "fine"}
    assert shown["spec"]["id"] == "aux-a"
    assert shown["evidence_digest"] == evidence.snapshot_digest
    assert shown["schema"] == "aios.auxiliary_run.snapshot.v1"


def test_aux_show_from_another_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.db"
    with RunStore(db) as runs:
        runs.create_run("s-1", "prompt", run_id="r-1")
        evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(ExecutionTarget("s-1", "r-1")))

    async def spawn() -> None:
        service = AuxiliaryRunService(Answer(), db)
        spec = AuxiliaryRunSpec(
            ExecutionFrame.root(evidence.target), "reviewer", "review", evidence.snapshot_digest
        ).with_id("aux-x")
        await (await service.spawn(spec, evidence)).wait()
        service.close()

    asyncio.run(spawn())
    done = run_cli("--db", db, "aux", "show", "aux-x")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == {"verdict": "fine"}
