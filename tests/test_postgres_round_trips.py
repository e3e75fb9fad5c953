"""What a task transition costs on PostgreSQL, counted, not timed: the round trips its client
waits for. libpq's own trace of every connection of the ledger's pool is read, and each
message after which the client waits for the server's ReadyForQuery (an extended-protocol
Sync, a simple-protocol Query) is one round trip. A transition's reads go in one flight with
its BEGIN and lock and the ids of the events it appends; its plan in one with its COMMIT; a
claim reads its tips between the two (the candidates it locks name the chains)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from aios_ledger.core import HeartbeatRequest, SqlWrite, Statement, WritePlan
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.api.tokens import issue_token, revoke_token
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.engines import postgresql as postgresql_engine
from aios_ledger.shell.db.statements import statements
from conftest import ledger_schema_url

TASK = {"goal": "g", "instructions": "run", "success_criteria": ["ok"]}


class Trips:
    """libpq's trace of the pool's connections, and the round trips in it so far."""

    def __init__(self, log: IO[str], path: Path) -> None:
        self.log = log
        self.path = path

    def count(self) -> int:
        self.log.flush()
        lines = self.path.read_text().splitlines()
        return sum(
            1
            for line in lines
            if line.startswith("F") and line.split("\t")[2:3] in (["Sync"], ["Query"])
        )

    def of(self, call: Callable[[], Any]) -> int:
        before = self.count()
        call()
        return self.count() - before


@pytest.fixture
def traced(
    postgres_database: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Trips]]:
    url = ledger_schema_url(postgres_database)
    path = tmp_path / "libpq.trace"
    with path.open("w") as log:
        configure = postgresql_engine.configure

        def trace(raw: psycopg.Connection[Any]) -> None:
            configure(raw)
            raw.pgconn.trace(log.fileno())
            raw.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

        monkeypatch.setattr(postgresql_engine, "configure", trace)
        yield url, Trips(log, path)


def test_a_transition_is_a_flight_of_reads_and_one_of_its_plan_and_commit(
    traced: tuple[str, Trips],
) -> None:
    url, trips = traced
    with TaskLedger(url) as ledger:
        ledger.create_task(TASK, idempotency_key="warm")  # the pool's first connection
        assert trips.of(lambda: ledger.create_task(TASK, idempotency_key="c")) == 2
        claims: list[Any] = []
        assert (
            trips.of(
                lambda: claims.append(ledger.claim(agent_id="w", capabilities=[], lease_seconds=60))
            )
            == 3
        )
        task_id, token = claims[0]["task_id"], claims[0]["lease_token"]
        heartbeat = trips.of(lambda: ledger.heartbeat(task_id, lease_token=token, lease_seconds=60))
        assert heartbeat == 2
        submit = trips.of(
            lambda: ledger.submit_result(
                task_id, lease_token=token, result={"summary": "ok"}, idempotency_key="s"
            )
        )
        assert submit == 2
        verify = trips.of(
            lambda: ledger.verify(
                task_id, decision="SUCCEEDED", reason="ok", idempotency_key="v", reviewer="r"
            )
        )
        assert verify == 2
        # A replay reads as the write did, and commits nothing it did not write.
        assert trips.of(lambda: ledger.create_task(TASK, idempotency_key="c")) == 2
        assert ledger.get(task_id)["status"] == "SUCCEEDED"
        assert [event["event_type"] for event in ledger.events(task_id)][-3:] == [
            "TASK_HEARTBEAT",
            "RESULT_SUBMITTED",
            "TASK_VERIFIED",
        ]


def test_an_exclusive_write_sends_the_sequences_move_with_its_plan(
    traced: tuple[str, Trips],
) -> None:
    """A write under the exclusive lock (an API token's, on the ledger's chain): its reads, its
    first id drawn, its chain's tip, then its plan with the sequence set past its events and
    the COMMIT: four round trips, none for the sequence alone (and none for the Merkle tree,
    which an integrator grows after the commit)."""
    url, trips = traced
    with Database(url) as db:
        issue_token(db, "warm", roles=["agent"])  # the pool's first connection
        assert trips.of(lambda: issue_token(db, "agent", roles=["agent"])) == 4
        assert trips.of(lambda: revoke_token(db, "agent")) == 4
        nexts, events = db.write_schema(
            lambda conn: (
                list(
                    conn.execute(
                        "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END"
                        " FROM event_ids"
                    )
                ),
                list(conn.execute("SELECT max(event_id) FROM events")),
            )
        )
        assert nexts[0][0] == events[0][0] + 1


def test_a_batch_reads_ahead_and_sends_its_plans_with_its_commit(
    traced: tuple[str, Trips],
) -> None:
    """A batch on distinct tasks: every item's reads in one flight (its events' ids drawn at
    its end), every plan with the COMMIT in the next."""
    url, trips = traced
    items = 5
    with TaskLedger(url) as ledger:
        ledger.create_task(TASK, idempotency_key="warm")
        created = trips.of(lambda: ledger.create_tasks((TASK, f"c{n}") for n in range(items)))
        assert created == 2
        claimed: list[Any] = []
        claim_many = trips.of(
            lambda: claimed.extend(
                ledger.claim_many(agent_id="w", capabilities=[], lease_seconds=60, limit=items + 1)
            )
        )
        assert claim_many == 3 and len(claimed) == items + 1
        submits = [
            {
                "task_id": claim["task_id"],
                "lease_token": claim["lease_token"],
                "result": {"summary": "ok"},
                "idempotency_key": f"s-{claim['task_id']}",
            }
            for claim in claimed
        ]
        assert trips.of(lambda: ledger.submit_results(submits)) == 2
        assert len(ledger.list_tasks("SUBMITTED")) == len(submits)
        # Again: every item a replay of its key, read ahead alike, nothing written.
        assert trips.of(lambda: ledger.submit_results(submits)) == 2
        verifies = [
            {
                "task_id": s["task_id"],
                "decision": "SUCCEEDED",
                "reason": "ok",
                "idempotency_key": f"v-{s['task_id']}",
            }
            for s in submits
        ]
        assert trips.of(lambda: ledger.verify_results(verifies, reviewer="r")) == 2
        assert len(ledger.list_tasks("SUCCEEDED")) == len(submits)
        events = [e["event_type"] for e in ledger.events(submits[0]["task_id"])]
        assert events[-2:] == ["RESULT_SUBMITTED", "TASK_VERIFIED"]


def test_a_batch_whose_items_share_a_task_reads_item_by_item(traced: tuple[str, Trips]) -> None:
    """The second write on a task decides on what the first wrote: its reads wait for it."""
    url, trips = traced
    with TaskLedger(url) as ledger:
        ledger.create_task(TASK, idempotency_key="c")
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)
        assert claim is not None
        task_id, token = claim["task_id"], claim["lease_token"]
        beats = [
            HeartbeatRequest.from_mapping(
                {"task_id": task_id, "lease_token": token, "lease_seconds": 60}
            )
            for _ in range(3)
        ]
        assert trips.of(lambda: ledger.apply_all(beats)) == 4
        assert ledger.get(task_id)["revision"] == claim["revision"] + 3


def test_every_compare_and_swap_is_checked_on_the_server_as_written() -> None:
    """PostgreSQL sends each guarded write's one text wrapped in its check: the guard the
    server checks is the one the statement registry declares, and there is no twin text."""
    texts = statements("postgresql")
    guarded = [statement for statement in Statement if statement.guarded]
    assert guarded
    for statement in guarded:
        plain = " ".join(postgresql_engine.TEXTS[statement].rstrip().rstrip(";").split())
        checked = " ".join(postgresql_engine._GUARDED_TEXTS[statement].split())
        assert checked.startswith(f"WITH changed AS ( {plain} RETURNING 1)")
        assert f"{statement}_checked" not in texts


def test_a_guard_that_misses_in_the_commits_flight_commits_nothing(
    traced: tuple[str, Trips],
) -> None:
    """The plan's last flight carries its COMMIT: a compare-and-swap that finds its row moved
    on fails on the server, so nothing of the plan, before it or after it, is committed."""
    url, _ = traced
    with TaskLedger(url) as ledger:
        task_id = ledger.create_task(TASK, idempotency_key="c")["task_id"]
    moved_on = dict.fromkeys(Statement.TASKS_CAS_UPDATE.parameters, None)
    moved_on.update(task_id=task_id, expected_revision=7, status="QUEUED", attempt=0)
    run = {"run_id": "r", "session_id": "s", "prompt": "p", "created_at": "2026-01-01T00:00:00Z"}
    plan = WritePlan(
        writes=(
            SqlWrite(Statement.INSERT_RUN, run),
            SqlWrite(Statement.TASKS_CAS_UPDATE, moved_on),
        ),
        events=(),
        response=None,
        tail=None,
    )
    with Database(url) as db:
        with pytest.raises(Exception) as refused:
            db.write(lambda conn: apply_decision(conn, plan))
        assert getattr(refused.value, "code", None) == "REVISION_CONFLICT"
        assert db.write_schema(lambda conn: list(conn.execute("SELECT * FROM runs"))) == []
