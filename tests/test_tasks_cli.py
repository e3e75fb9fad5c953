"""The task commands: JSON in (files or stdin), JSON out, `CODE: detail` on refusal."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.shell.cli import build_parser, main
from aios_ledger.shell.tasks import cli as tasks_cli


class Cli:
    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db = str(tmp_path / "cli.sqlite3")
        self.tmp_path = tmp_path
        self.capsys = capsys
        self.count = 0

    def run(self, *argv: str, body: Any = None) -> tuple[int, Any, str]:
        args = ["--db", self.db, *argv]
        if body is not None:
            self.count += 1
            request = self.tmp_path / f"request-{self.count}.json"
            request.write_text(json.dumps(body))
            args += ["--json", str(request)]
        code = main(args)
        captured = self.capsys.readouterr()
        output = json.loads(captured.out) if captured.out.strip() else None
        return code, output, captured.err


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path, capsys)
    assert runner.run("init")[0] == 0  # every command but `init` needs an existing ledger
    return runner


def test_the_whole_lifecycle_on_the_command_line(cli: Cli) -> None:
    code, created, _ = cli.run(
        "task",
        "create",
        body={"idempotency_key": "c1", "task": {"task_id": "t1", "goal": "g", "instructions": "i"}},
    )
    assert code == 0 and created["task_id"] == "t1" and created["idempotent"] is False
    code, many, _ = cli.run(
        "task",
        "create",
        body=[
            {"idempotency_key": "c2", "task": {"task_id": "t2", "goal": "g", "instructions": "i"}},
            {"idempotency_key": "c3", "task": {"task_id": "t3", "goal": "g", "instructions": "i"}},
        ],
    )
    assert [item["task_id"] for item in many] == ["t2", "t3"]
    code, listed, _ = cli.run("task", "list", "--status", "QUEUED")
    assert [task["task_id"] for task in listed] == ["t1", "t2", "t3"]

    code, claim, _ = cli.run(
        "claim", body={"agent_id": "w", "capabilities": [], "lease_seconds": 60, "task_id": "t1"}
    )
    assert code == 0 and claim["status"] == "CLAIMED" and claim["lease_token"]
    token = claim["lease_token"]
    code, beat, _ = cli.run(
        "heartbeat", body={"task_id": "t1", "lease_token": token, "lease_seconds": 60}
    )
    assert beat["revision"] == 3
    code, submitted, _ = cli.run(
        "submit",
        body={"task_id": "t1", "lease_token": token, "result": {"ok": 1}, "idempotency_key": "s"},
    )
    assert submitted["status"] == "SUBMITTED"
    code, verified, _ = cli.run(
        "task",
        "verify",
        body={
            "task_id": "t1",
            "decision": "NEEDS_REWORK",
            "reason": "again",
            "idempotency_key": "v",
            "expected_result_digest": submitted["result_digest"],
        },
    )
    assert (verified["status"], verified["revision"], verified["attempt"]) == ("QUEUED", 5, 1)
    code, cancelled, _ = cli.run(
        "cancel", body={"task_id": "t2", "reason": "no", "idempotency_key": "x"}
    )
    assert cancelled["status"] == "CANCELLED"
    code, expired, _ = cli.run("expire-leases")
    assert expired == {"count": 0, "expired": []}
    code, shown, _ = cli.run("task", "show", "t1")
    assert shown["verification"] == {"decision": "NEEDS_REWORK", "reason": "again"}
    code, events, _ = cli.run("events", "t1")
    assert [event["event_type"] for event in events] == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]


def test_release_on_the_command_line(cli: Cli) -> None:
    cli.run(
        "task",
        "create",
        body={"idempotency_key": "c1", "task": {"task_id": "t1", "goal": "g", "instructions": "i"}},
    )
    _, claim, _ = cli.run("claim", body={"agent_id": "w", "capabilities": [], "lease_seconds": 60})
    release = {"task_id": "t1", "lease_token": claim["lease_token"], "reason": "stopping"}
    code, released, _ = cli.run("release", body=release)
    assert code == 0 and (released["status"], released["attempt"]) == ("QUEUED", 1)
    code, output, err = cli.run("release", body=release)
    assert (code, output) == (1, None) and err.startswith("LEASE_INVALID:")
    code, events, _ = cli.run("events", "t1")
    assert events[-1]["event_type"] == "TASK_RELEASED"
    assert events[-1]["payload"]["reason"] == "stopping"


def test_claim_reads_stdin_and_prints_null_when_idle(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = json.dumps({"agent_id": "w", "capabilities": [], "lease_seconds": 60}).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(body)))
    code, output, err = cli.run("claim", "--json", "-")
    assert (code, output, err) == (0, None, "")


@pytest.mark.parametrize(
    "argv,body,expected",
    [
        (("task", "show", "nope"), None, "TASK_NOT_FOUND"),
        (("task", "create"), {"task": {"goal": "g", "instructions": "i"}}, "FIELDS_INVALID"),
        (("task", "create"), "text", "FIELDS_INVALID"),
        (("claim",), {"agent_id": "w", "lease_seconds": 5}, "FIELDS_INVALID"),
        (
            ("claim",),
            {"agent_id": "w", "capabilities": [], "lease_seconds": 5, "idempotency_key": "k"},
            "LEASE_TOKEN_REQUIRED",
        ),
        (
            ("heartbeat",),
            {"task_id": "t", "lease_token": "x" * 20, "lease_seconds": 5},
            "TASK_NOT_FOUND",
        ),
        (("task", "verify"), {"task_id": "t"}, "FIELDS_INVALID"),
        (("release",), {"task_id": "t", "lease_token": "x" * 20}, "FIELDS_INVALID"),
        (("task", "list", "--status", "DONE"), None, "FIELDS_INVALID"),
        (
            ("claim", "--limit", "2"),
            {"agent_id": "w", "capabilities": [], "lease_seconds": 5, "task_id": "t"},
            "FIELDS_INVALID",
        ),
        (
            ("claim", "--limit", "0"),
            {"agent_id": "w", "capabilities": [], "lease_seconds": 5},
            "FIELDS_INVALID",
        ),
        (("submit",), [], "FIELDS_INVALID"),
        (("task", "verify"), [{"task_id": "t"}], "FIELDS_INVALID"),
    ],
)
def test_refusals_print_the_code(cli: Cli, argv: tuple[str, ...], body: Any, expected: str) -> None:
    code, output, err = cli.run(*argv, body=body)
    assert code == 1 and output is None
    assert err.startswith(expected + ":")


def test_batches_on_the_command_line(cli: Cli) -> None:
    tasks = [
        {"idempotency_key": f"c{n}", "task": {"task_id": f"t{n}", "goal": "g", "instructions": "i"}}
        for n in range(3)
    ]
    cli.run("task", "create", body=tasks)
    again = [tasks[0], {"idempotency_key": "c9", "task": {"task_id": "t1", "goal": "g"}}]
    code, output, err = cli.run("task", "create", body=again)
    assert (code, output) == (1, None) and err.startswith("FIELDS_INVALID: item 1: ")
    code, output, err = cli.run("task", "create", body=[tasks[0], {"task": {}}])
    assert (code, output) == (1, None) and err.startswith("FIELDS_INVALID: item 1: ")
    code, output, err = cli.run("task", "create", body=dict(tasks[1], idempotency_key="c8"))
    assert (code, output) == (1, None) and err.startswith("TASK_ALREADY_EXISTS: ")
    assert "item" not in err
    request = {"agent_id": "w", "capabilities": [], "lease_seconds": 60}
    code, claims, _ = cli.run("claim", "--limit", "2", body=request)
    assert code == 0 and [claim["task_id"] for claim in claims] == ["t0", "t1"]
    submissions = [
        {
            "task_id": claim["task_id"],
            "lease_token": claim["lease_token"],
            "result": {"ok": 1},
            "idempotency_key": f"s-{claim['task_id']}",
        }
        for claim in claims
    ]
    code, submitted, _ = cli.run("submit", body=submissions)
    assert [answer["status"] for answer in submitted] == ["SUBMITTED", "SUBMITTED"]
    verdicts = [
        {"task_id": task_id, "decision": "SUCCEEDED", "reason": "ok", "idempotency_key": f"v{n}"}
        for n, task_id in enumerate(["t0", "t1", "t2"])
    ]
    code, output, err = cli.run("task", "verify", body=verdicts)
    assert (code, output) == (1, None) and err.startswith("INVALID_TRANSITION: item 2: ")
    code, verified, _ = cli.run("task", "verify", body=verdicts[:2])
    assert [answer["status"] for answer in verified] == ["SUCCEEDED", "SUCCEEDED"]
    code, rest, _ = cli.run("claim", "--limit", "5", body=request)
    assert [claim["task_id"] for claim in rest] == ["t2"]
    assert cli.run("claim", "--limit", "5", body=request)[1] == []


def test_every_keyed_command_takes_a_list_and_an_unkeyed_one_does_not(cli: Cli) -> None:
    """A command made from its operation's row takes a list when the operation is keyed, as a
    repeat of the whole list is then safe; a heartbeat's list is refused like any non-object."""
    tasks = [
        {"idempotency_key": f"c{n}", "task": {"task_id": f"t{n}", "goal": "g", "instructions": "i"}}
        for n in range(2)
    ]
    cli.run("task", "create", body=tasks)
    cancels = [
        {"task_id": task_id, "reason": "no", "idempotency_key": f"x-{task_id}"}
        for task_id in ("t0", "t1", "nope")
    ]
    code, output, err = cli.run("cancel", body=cancels)
    assert (code, output) == (1, None) and err.startswith("TASK_NOT_FOUND: item 2: ")
    assert [task["status"] for task in cli.run("task", "list")[1]] == ["QUEUED", "QUEUED"]
    code, cancelled, _ = cli.run("cancel", body=cancels[:2])
    assert code == 0 and [answer["status"] for answer in cancelled] == ["CANCELLED"] * 2
    retries = [{**cancel, "idempotency_key": f"r-{cancel['task_id']}"} for cancel in cancels[:2]]
    code, retried, _ = cli.run("task", "retry", body=retries)
    assert code == 0 and [answer["status"] for answer in retried] == ["QUEUED"] * 2
    beats = [{"task_id": "t0", "lease_token": "x" * 20, "lease_seconds": 5}]
    code, output, err = cli.run("heartbeat", body=beats)
    assert (code, output) == (1, None) and err.startswith("FIELDS_INVALID:")


def test_an_operation_row_alone_makes_its_command(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows no code in shell/tasks/cli.py names get commands: an owner's move of one task takes
    arguments, any other request a JSON document (here over cancel's and retry's records)."""
    drop = attrs.evolve(TASK_OPERATIONS["cancel"], name="drop", command="task drop", summary="d")
    again = attrs.evolve(TASK_OPERATIONS["retry"], name="again", command="task again", summary="a")
    rows = {**TASK_OPERATIONS, "drop": drop, "again": again}
    monkeypatch.setattr(tasks_cli, "TASK_OPERATIONS", rows)
    task = {"task_id": "t1", "goal": "g", "instructions": "i"}
    assert cli.run("task", "create", body={"idempotency_key": "c", "task": task})[0] == 0
    code, dropped, _ = cli.run("task", "drop", "t1", "--reason", "r", "--idempotency-key", "k1")
    assert code == 0 and dropped["status"] == "CANCELLED"
    body = [{"task_id": "t1", "reason": "r", "idempotency_key": "k2", "extra_attempts": 2}]
    code, again_answers, _ = cli.run("task", "again", body=body)
    assert code == 0 and [answer["status"] for answer in again_answers] == ["QUEUED"]
    helped = build_parser().format_help()
    assert "tasks: create, list, show, history, verify, retry, pause, resume, drop, again" in (
        " ".join(helped.split())
    )
