"""Budgets on both engines, with real components: a real worker running a real sleeping program
past its task's wall time, results over their budget left for a person, spend summed and
sealed (verify finds a spend row edited behind the ledger's back), and the spend in `status`,
GET /v1/spend and /metrics of a served ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.spend import read_spend
from aios_ledger.shell.work.reviewer import tasks_to_review
from aios_ledger.shell.work.worker import Worker, WorkerConfig
from api_server import ApiServer, cli
from cli_runner import run_cli
from conftest import both_engines
from test_log_support import tamper

pytest_generate_tests = both_engines

EUR_LIMIT = {"micros": 2_000_000, "currency": "EUR"}  # EUR 2.00


def _create(ledger: TaskLedger, key: str, **task: Any) -> str:
    answer = ledger.create_task({"goal": "g", "instructions": "i", **task}, idempotency_key=key)
    return str(answer["task_id"])


def _usage(input_tokens: int, output_tokens: int = 0, micros: int | None = None) -> Any:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if micros is not None:
        usage["cost"] = {"micros": micros, "currency": "EUR"}
    return usage


def _work(ledger: TaskLedger, agent: str, result: Any, usage: Any, key: str) -> Any:
    claim = ledger.claim(agent_id=agent, capabilities=[], lease_seconds=60)
    assert claim is not None
    return ledger.submit_result(
        claim["task_id"],
        lease_token=claim["lease_token"],
        result=result,
        idempotency_key=key,
        usage=usage,
    )


def _alive(pid: int) -> bool:
    """Whether `pid` still runs: a killed process nobody reaps (its parent, the guard, was
    killed too) stays a zombie until PID 1 reaps it, and a zombie runs nothing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_worker_stops_an_agent_over_its_wall_time(ledger_target: Path, tmp_path: Path) -> None:
    """The program ignores SIGTERM and sleeps for minutes: at its task's one-second wall limit
    the worker signals its group, kills what is left after the grace and submits the attempt
    as failed (`wall_time_exceeded`); the automatic verification then sends it back to the
    queue, as any failed attempt. The worker's own timeout (60 s) is not what stops it."""
    with TaskLedger(ledger_target) as ledger:
        task_id = _create(ledger, "wall", verification="auto", budget={"wall_seconds": 1})
    pid_file = tmp_path / "agent.pid"
    command = f"trap '' TERM; echo $$ > {pid_file}; echo started >&2; while :; do sleep 1; done"
    config = WorkerConfig(agent_id="w1", capabilities=(), command=command, timeout=60, once=True)
    worker = Worker(ledger_target, config)
    try:
        assert worker.run() == 0
    finally:
        worker.close()
    # The budget stopped it: the worker's own timeout would have been a `timeout` failure.
    [outcome] = worker.outcomes
    assert (outcome.outcome, outcome.detail) == ("failure-submitted", "wall_time_exceeded")
    assert not _alive(int(pid_file.read_text()))
    with TaskLedger(ledger_target) as ledger:
        task = ledger.get(task_id)
        kinds = [event["event_type"] for event in ledger.events(task_id)]
    assert task["result"]["failure"] == "wall_time_exceeded"
    assert task["result"]["evidence"]["stderr_tail"] == ["started"]
    assert (task["status"], task["attempt"]) == ("QUEUED", 1)
    assert task["verification"]["decision"] == "NEEDS_REWORK"
    assert kinds[-2:] == ["RESULT_SUBMITTED", "TASK_VERIFIED"]


def test_a_worker_hands_the_agents_usage_to_the_ledger(ledger_target: Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        task_id = _create(ledger, "usage", verification="auto", budget={"input_tokens": 100})
    report = json.dumps({"status": "SUCCEEDED", "usage": _usage(40, 2, micros=5)})
    command = f"cat > /dev/null; echo '{report}'"
    config = WorkerConfig(agent_id="w1", capabilities=(), command=command, once=True)
    worker = Worker(ledger_target, config)
    try:
        worker.run()
    finally:
        worker.close()
    with TaskLedger(ledger_target) as ledger:
        task = ledger.get(task_id)
    assert task["status"] == "SUCCEEDED"
    assert task["result"] == {"status": "SUCCEEDED"}  # the usage went beside it
    with Database(ledger_target) as db:
        spend = db.read(read_spend)
    assert spend["by_task"] == [
        {
            "task_id": task_id,
            "currency": "EUR",
            "reports": 1,
            "input_tokens": 40,
            "output_tokens": 2,
            "cost_micros": 5,
            "over_budget": 0,
        }
    ]


def test_an_over_budget_result_is_not_verified_automatically(ledger_target: Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        auto = _create(ledger, "auto", verification="auto", budget={"cost": EUR_LIMIT}, priority=2)
        reviewed = _create(ledger, "reviewed", budget={"input_tokens": 100}, priority=1)
        within = _create(ledger, "within", budget={"input_tokens": 100})
        over = _work(ledger, "w1", {"status": "SUCCEEDED"}, _usage(10, micros=2_000_001), "s1")
        assert (over["task_id"], over["status"], over["over_budget"]) == (auto, "SUBMITTED", True)
        late = _work(ledger, "w1", {"status": "SUCCEEDED"}, _usage(101), "s2")
        assert (late["task_id"], late["over_budget"]) == (reviewed, True)
        fine = _work(ledger, "w1", {"status": "SUCCEEDED"}, _usage(100), "s3")
        assert (fine["task_id"], fine["over_budget"]) == (within, False)
        submitted = ledger.events(auto)[-1]
        assert submitted["event_type"] == "RESULT_SUBMITTED"
        assert submitted["payload"]["over_budget"] == {
            "code": "BUDGET_EXCEEDED",
            "exceeded": ["cost"],
        }
        assert ledger.get(auto)["verification"] is None
    with RunStore(ledger_target) as runs:
        # The review round takes the result within budget and leaves the other to a person.
        assert [task["task_id"] for task in tasks_to_review(runs, 10)] == [within]
    with TaskLedger(ledger_target) as ledger:
        # A person still judges it, as any submitted result.
        verdict = ledger.verify(
            auto, decision="SUCCEEDED", reason="worth it", idempotency_key="v1", reviewer="p1"
        )
    assert verdict["status"] == "SUCCEEDED"


def test_a_bad_usage_is_refused_and_changes_nothing(ledger_target: Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        task_id = _create(ledger, "bad", budget={"input_tokens": 100})
        claim = ledger.claim(agent_id="w1", capabilities=[], lease_seconds=60)
        assert claim is not None
        before = ledger.events(task_id)
        for usage in ({"input_tokens": -1}, {"cost": {"micros": 0.5, "currency": "EUR"}}):
            with pytest.raises(LedgerError, match="FIELDS_INVALID"):
                ledger.submit_result(
                    task_id,
                    lease_token=claim["lease_token"],
                    result={},
                    idempotency_key="s",
                    usage=usage,
                )
        assert ledger.events(task_id) == before
        assert ledger.get(task_id)["status"] == "CLAIMED"


def test_spend_sums_by_task_agent_repository_and_day_and_is_sealed(ledger_target: Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        first = _create(ledger, "first", budget={"cost": EUR_LIMIT})
        second = _create(ledger, "second", verification="auto")
        # first: a failed attempt, judged so, retried, and a second attempt that takes its
        # spend one micro-unit past its budget: the spend adds up over both attempts.
        _work(ledger, "w1", {"status": "FAILED"}, _usage(100, 10, micros=1_500_000), "a")
        _work(ledger, "w2", {"status": "SUCCEEDED"}, _usage(1, 2, micros=3), "b")
        ledger.verify(first, decision="FAILED", reason="no", idempotency_key="v", reviewer="p1")
        ledger.retry(first, reason="again", idempotency_key="r")
        answer = _work(ledger, "w1", {"status": "SUCCEEDED"}, _usage(200, 20, micros=500_001), "c")
        assert (answer["task_id"], answer["status"], answer["over_budget"]) == (
            first,
            "SUBMITTED",
            True,
        )
    with Database(ledger_target) as db:
        spend = db.read(read_spend)
        assert verify_log(db).public()["intact"] is True
    day = spend["by_day"][0]["day"]
    assert spend["by_task"] == [
        _row("task_id", first, reports=2, tokens=(300, 30), micros=2_000_001, over=1),
        _row("task_id", second, reports=1, tokens=(1, 2), micros=3, over=0),
    ]
    assert spend["by_agent"] == [
        _row("agent_id", "w1", reports=2, tokens=(300, 30), micros=2_000_001, over=1),
        _row("agent_id", "w2", reports=1, tokens=(1, 2), micros=3, over=0),
    ]
    assert spend["by_repository"] == [
        _row("repository", None, reports=3, tokens=(301, 32), micros=2_000_004, over=1)
    ]
    assert spend["by_day"] == [
        _row("day", day, reports=3, tokens=(301, 32), micros=2_000_004, over=1)
    ]
    # An edited spend row no longer matches the seal its submit took; a deleted one is found
    # by the seal that names it.
    tamper(ledger_target, ("UPDATE task_spend SET cost_micros = 1 WHERE task_id = ?", (second,)))
    assert _state_findings(ledger_target) == {("STATE_MISMATCH", "task_spend", f"{second} 1")}
    tamper(ledger_target, ("DELETE FROM task_spend WHERE task_id = ?", (second,)))
    assert ("task_spend", f"{second} 1") in {
        (finding.get("table"), finding.get("key")) for finding in _report(ledger_target)
    }


def _row(
    key: str, value: Any, *, reports: int, tokens: tuple[int, int], micros: int, over: int
) -> Any:
    return {
        key: value,
        "currency": "EUR",
        "reports": reports,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cost_micros": micros,
        "over_budget": over,
    }


def _report(target: Path) -> list[dict[str, Any]]:
    with Database(target) as db:
        return list(verify_log(db).public()["findings"])


def _state_findings(target: Path) -> set[tuple[str, Any, Any]]:
    return {
        (finding["code"], finding.get("table"), finding.get("key")) for finding in _report(target)
    }


def test_spend_is_served_in_status_the_spend_route_and_the_metrics(ledger_target: Path) -> None:
    with ApiServer(ledger_target, role_tokens=True) as server:
        owner, agent = server.client("owner"), server.client("agent")
        created = owner.post(
            "/v1/tasks",
            json={
                "idempotency_key": "served",
                "task": {"goal": "g", "instructions": "i", "budget": {"input_tokens": 10}},
            },
        )
        assert created.status_code == 201, created.text
        bad = owner.post(
            "/v1/tasks",
            json={
                "idempotency_key": "served-bad",
                "task": {"goal": "g", "instructions": "i", "budget": {"cost": {"micros": 1.5}}},
            },
        )
        assert (bad.status_code, bad.json()["code"]) == (422, "FIELDS_INVALID")
        claim = agent.post(
            "/v1/claims",
            json={
                "capabilities": [],
                "lease_seconds": 60,
                "idempotency_key": "c1",
                "lease_token": "served-lease-token-0123456789",
            },
        ).json()
        assert claim["budget"]["input_tokens"] == 10
        submitted = agent.post(
            f"/v1/tasks/{claim['task_id']}/result",
            json={
                "lease_token": "served-lease-token-0123456789",
                "result": {"status": "SUCCEEDED"},
                "idempotency_key": "r1",
                "usage": _usage(11, 1, micros=70),
            },
        )
        assert submitted.status_code == 200, submitted.text
        assert submitted.json()["over_budget"] is True
        reader = server.client("auditor")
        spend = reader.get("/v1/spend").json()
        assert spend["by_agent"] == [
            _row("agent_id", "agent-1", reports=1, tokens=(11, 1), micros=70, over=1)
        ]
        assert reader.get("/v1/status").json()["spend"] == spend
        metrics = reader.get("/metrics").text
    labels = 'agent="agent-1",repository=""'
    assert f"aios_ledger_spend_input_tokens_total{{{labels}}} 11.0" in metrics
    assert f"aios_ledger_spend_output_tokens_total{{{labels}}} 1.0" in metrics
    cost = 'aios_ledger_spend_cost_micros_total{agent="agent-1",currency="EUR",repository=""}'
    assert f"{cost} 70.0" in metrics
    assert f"aios_ledger_over_budget_results_total{{{labels}}} 1.0" in metrics
    assert 'aios_ledger_spend_day_tokens{day="' in metrics


def test_task_create_sets_the_budget_from_its_flags(ledger_target: Path, tmp_path: Path) -> None:
    db = str(ledger_target)
    cli("--db", db, "init")
    request = tmp_path / "task.json"
    request.write_text(
        json.dumps(
            {
                "idempotency_key": "flags",
                "task": {"goal": "g", "instructions": "i", "budget": {"input_tokens": 5}},
            }
        )
    )
    created = json.loads(
        cli(
            "--db",
            db,
            "task",
            "create",
            "--json",
            str(request),
            "--wall-seconds",
            "30",
            "--max-cost",
            "2500000:EUR",
        )
    )
    shown = json.loads(cli("--db", db, "task", "show", created["task_id"], "--json"))
    assert shown["metadata"]["budget"] == {
        "wall_seconds": 30,
        "input_tokens": 5,
        "output_tokens": None,
        "cost": {"micros": 2_500_000, "currency": "EUR"},
    }
    for flags, code in (
        (("--max-cost", "2.5:EUR"), "USAGE_INVALID"),
        (("--max-cost", "25:eur"), "FIELDS_INVALID"),
        (("--wall-seconds", "0"), "FIELDS_INVALID"),
    ):
        create = ["task", "create", "--json", str(request), *flags]
        refused = run_cli("--db", db, *create)
        assert refused.returncode != 0 and refused.stderr.startswith(code), refused.stderr
    # Nothing was written by the refused ones (the first key is the only one filed).
    assert [task["task_id"] for task in json.loads(cli("--db", db, "task", "list", "--json"))] == [
        created["task_id"]
    ]
