"""The Merkle log off PostgreSQL's write path: a write records its events and nothing global, an
integrator appends what committed in passes (in order, idempotent, one at a time), an event
committed late with a lower id is still appended, and the scan floor never passes an id that
may still commit. SQLite keeps appending in the write's transaction. The floor's rules are the
core's (`ScanFloor`), checked here without a database too."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError, chain_of
from aios_ledger.core.log.merkle import IntegrationBound, ScanFloor
from aios_ledger.core.log.plan import sealed_plan
from aios_ledger.shell import Database, TaskLedger, verify_log
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.merkle import (
    Integrator,
    current_tree_head,
    integrate,
    prove_inclusion,
    prove_integrated,
)
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.serve.app import served_app
from cli_runner import run_cli
from conftest import both_engines, is_postgres
from starlette.testclient import TestClient
from test_log_support import event, raw_rows


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """SQLite appends each write's leaves in the write's own transaction: the integrator's
    tests (those taking `pg_target`) are PostgreSQL's alone; the others run on both."""
    if "pg_target" in metafunc.fixturenames:
        metafunc.parametrize("engine", ["postgresql"])
    else:
        both_engines(metafunc)


TASK = {"goal": "g", "instructions": "i"}
# Bound on a wait for another thread's step: reached only when the code under test is broken.
PATIENCE = 60.0


@pytest.fixture
def pg_target(ledger_target: str | Path) -> str:
    assert isinstance(ledger_target, str) and is_postgres(ledger_target)
    return ledger_target


def _leaves(target: Any) -> list[tuple[int, int]]:
    return raw_rows(target, "SELECT leaf_index, event_id FROM merkle_leaves ORDER BY leaf_index")


def _head_row_xmax(target: Any) -> list[tuple[str]]:
    """The head row's xmax: the id of the last transaction that locked or changed it."""
    return raw_rows(target, "SELECT xmax::text FROM merkle_tree")


def _event_ids(target: Any) -> list[int]:
    return [row[0] for row in raw_rows(target, "SELECT event_id FROM events ORDER BY event_id")]


# -- the scan floor (pure) --------------------------------------------------------------------


def test_the_floor_waits_for_the_transactions_in_progress_when_its_value_was_paired() -> None:
    floor = ScanFloor()
    # Pass 1 reads the sequence at 10 (after its snapshot): nothing is settled yet.
    settled, floor = floor.settle(IntegrationBound(0, 10, ("501",)))
    assert (settled, floor.unpaired, floor.waiting) == (0, 10, None)
    floor = floor.after_pass(settled, [3, 4], batch=100)
    assert floor.floor == 0
    # Pass 2's snapshot pairs 10 with the transaction still in progress; the sequence is at 12.
    settled, floor = floor.settle(IntegrationBound(0, 12, ("502",)))
    assert (settled, floor.waiting, floor.unpaired) == (0, (10, ("502",)), 12)
    floor = floor.after_pass(settled, [], batch=100)
    # Pass 3: 502 still runs, so 10 is not settled; the newest value waits to be paired.
    settled, floor = floor.settle(IntegrationBound(1, 15, ("502", "503")))
    assert (settled, floor.waiting, floor.unpaired) == (0, (10, ("502",)), 15)
    floor = floor.after_pass(settled, [11], batch=100)
    assert floor.floor == 0
    # Pass 4: 502 ended; every id up to 10 is settled, and 15 pairs with this snapshot.
    settled, floor = floor.settle(IntegrationBound(0, 15, ("503",)))
    assert (settled, floor.waiting, floor.unpaired) == (10, (15, ("503",)), 15)
    assert floor.after_pass(settled, [7], batch=100).floor == 10


def test_a_snapshot_with_nothing_in_progress_settles_its_pair_at_once() -> None:
    _, floor = ScanFloor().settle(IntegrationBound(0, 20))
    settled, floor = floor.settle(IntegrationBound(0, 25))
    assert settled == 20 and floor.waiting is None and floor.unpaired == 25
    assert floor.after_pass(settled, [], batch=5).floor == 20


def test_a_full_batch_stops_the_floor_at_its_last_id() -> None:
    _, floor = ScanFloor().settle(IntegrationBound(0, 100))
    settled, floor = floor.settle(IntegrationBound(0, 100))
    assert settled == 100
    assert floor.after_pass(settled, [1, 2, 3], batch=3).floor == 3
    assert floor.after_pass(settled, [1, 2], batch=3).floor == 100


def test_the_floor_never_falls() -> None:
    floor = ScanFloor(floor=50)
    settled, floor = floor.settle(IntegrationBound(0, 40))
    assert floor.after_pass(settled, [60, 61], batch=2).floor == 50


# -- both engines -----------------------------------------------------------------------------


def test_a_write_is_provable_once_integrated_on_both_engines(ledger_target: str | Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        created = [ledger.create_task(TASK, idempotency_key=f"c{n}") for n in range(3)]
    with Database(ledger_target) as db:
        ids = _event_ids(ledger_target)
        assert len(ids) == len(created)
        if is_postgres(ledger_target):
            assert current_tree_head(db).size == 0  # the writes left the tree alone
            done = integrate(db)
            assert done is not None and done.appended == 3
        else:
            assert integrate(db) is None  # each write appended its own leaves
        head = current_tree_head(db)
        assert head.size == 3
        assert [event_id for _, event_id in _leaves(ledger_target)] == ids
        for event_id in ids:
            prove_inclusion(db, event_id).check(head.root)
        assert verify_log(db).intact


# -- PostgreSQL: the integrator -----------------------------------------------------------------


def test_integrating_appends_in_id_order_and_again_appends_nothing(pg_target: str) -> None:
    with TaskLedger(pg_target) as ledger:
        for n in range(5):
            ledger.create_task(TASK, idempotency_key=f"c{n}")
    with Database(pg_target) as db:
        integrator = Integrator(db, batch=2)
        with pytest.raises(LedgerError, match=r"^EVENT_NOT_INTEGRATED"):
            prove_inclusion(db, _event_ids(pg_target)[0])
        first = integrator.run_pass()
        assert (first.appended, first.size, first.more) == (2, 2, True)
        done = integrator.catch_up()
        assert (done.appended, done.size, done.more) == (3, 5, False)
        assert integrator.catch_up().appended == 0
        assert Integrator(db).catch_up().appended == 0  # a fresh one finds nothing either
    assert _leaves(pg_target) == list(enumerate(_event_ids(pg_target)))
    with Database(pg_target) as db:
        assert verify_log(db).intact


def test_a_pass_with_nothing_to_append_leaves_the_head_row_unlocked(pg_target: str) -> None:
    """A row lock gives the pass's transaction an id, and its commit a WAL flush: an idle
    server's passes, one every pause, must not pay that. A lock leaves its transaction's id in
    the row's xmax."""
    with TaskLedger(pg_target) as ledger:
        ledger.create_task(TASK, idempotency_key="c")
    with Database(pg_target) as db:
        integrator = Integrator(db)
        assert integrator.run_pass().appended > 0
        appended_by = _head_row_xmax(pg_target)
        assert integrator.run_pass().appended == 0
        assert integrator.run_pass().appended == 0
        assert _head_row_xmax(pg_target) == appended_by
        with TaskLedger(database=db) as ledger:
            ledger.create_task(TASK, idempotency_key="d")
        assert integrator.run_pass().appended > 0  # the lock is still taken to append


def test_two_integrators_at_once_never_double_a_leaf(pg_target: str) -> None:
    with TaskLedger(pg_target) as ledger:
        ledger.create_tasks((TASK, f"c{n}") for n in range(40))
    with Database(pg_target) as one, Database(pg_target) as other:
        integrators = [Integrator(one, batch=3), Integrator(other, batch=3)]
        appended: list[int] = []
        threads = [
            threading.Thread(target=lambda i=i: appended.append(i.catch_up().appended))
            for i in integrators
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE)
        assert len(appended) == 2 and sum(appended) == 40  # each event appended once
        assert current_tree_head(one).size == 40
        assert verify_log(one).intact
    event_ids = [event_id for _, event_id in _leaves(pg_target)]
    assert sorted(event_ids) == _event_ids(pg_target)


def test_an_event_committed_late_with_a_lower_id_is_still_integrated(pg_target: str) -> None:
    """A slow writer draws its id, a faster one draws a higher id and commits first: a pass
    appends the faster one's event and keeps its floor below the slow one's id; once the slow
    one commits, its event is appended after (leaf order is integration order)."""
    drawn, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    holder_ids: list[int] = []

    def slow_writer() -> None:
        try:
            with Database(pg_target) as db:

                def write(conn: Connection) -> None:
                    plans = PlanExecutor(conn)
                    tail = plans.tail(chain_of("t-slow"))
                    plan = sealed_plan((), (event("t-slow", 0),), None, tail=tail)
                    plans.apply(plan)
                    holder_ids.append(plans.tail(chain_of("t-slow")).next_event_id - 1)
                    conn.flush()  # type: ignore[attr-defined]  # its id drawn on the server
                    drawn.set()
                    assert release.wait(PATIENCE)

                db.write(write, row_locked=True)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    thread = threading.Thread(target=slow_writer)
    thread.start()
    try:
        assert drawn.wait(PATIENCE), failures
        with TaskLedger(pg_target) as ledger:
            ledger.create_task(TASK, idempotency_key="fast")
        with Database(pg_target) as db:
            integrator = Integrator(db)
            for _ in range(4):  # passes enough to settle anything that could settle
                integrator.run_pass()
            (slow_id,) = holder_ids
            fast_ids = [event_id for event_id in _event_ids(pg_target) if event_id != slow_id]
            assert fast_ids and min(fast_ids) > slow_id
            assert [event_id for _, event_id in _leaves(pg_target)] == fast_ids
            assert integrator.floor < slow_id
            release.set()
            thread.join(PATIENCE)
            assert not failures, failures
            done = integrator.catch_up()
            assert done.appended == 1
            assert [event_id for _, event_id in _leaves(pg_target)] == [*fast_ids, slow_id]
            # Settled once the slow writer ended and the transactions a pass saw in progress
            # (the server's, any database's) did too.
            deadline = _deadline()
            while integrator.floor < slow_id:
                assert _before(deadline), "the floor never rose past the slow writer's id"
                integrator.run_pass()
            assert verify_log(db).intact
    finally:
        release.set()
        thread.join(PATIENCE)


def test_a_postgresql_write_runs_no_statement_of_the_tree(pg_target: str) -> None:
    """The statements a lifecycle's writes send name neither the tree's head row nor its
    leaves (what made writers on every process queue on one row)."""
    sent: list[str] = []
    from aios_ledger.shell.db.engines import postgresql as engine

    original = engine.PgConnection._round_trip

    def recording(self: Any, items: Any, *, commit: bool = False) -> Any:
        sent.extend(queued.text for queued in self._queued)
        sent.extend(engine._text(name, params)[0] for name, params in items)
        return original(self, items, commit=commit)

    engine.PgConnection._round_trip = recording  # type: ignore[method-assign]
    try:
        with TaskLedger(pg_target) as ledger:
            task_id = ledger.create_task(TASK, idempotency_key="c")["task_id"]
            claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)
            assert claim is not None and claim["task_id"] == task_id
            token = claim["lease_token"]
            ledger.submit_result(
                task_id, lease_token=token, result={"summary": "ok"}, idempotency_key="s"
            )
            ledger.verify(
                task_id, decision="SUCCEEDED", reason="ok", idempotency_key="v", reviewer="r"
            )
    finally:
        engine.PgConnection._round_trip = original  # type: ignore[method-assign]
    assert sent and any("INSERT INTO events" in text for text in sent)
    assert not [text for text in sent if "merkle_" in text]


# -- PostgreSQL: on demand, prove --wait, the API ----------------------------------------------


def test_prove_integrates_on_demand_and_waits_for_an_event_to_come(pg_target: str) -> None:
    with TaskLedger(pg_target) as ledger:
        ledger.create_task(TASK, idempotency_key="c0")
    (first,) = _event_ids(pg_target)
    proof = run_cli("--db", pg_target, "prove", str(first))
    assert proof.returncode == 0, proof.stderr
    # An event not written yet: `--wait` tries again after each pause, here the moment it is
    # written, so the wait ends with its proof.
    written: list[int] = []

    def pause(_: float) -> None:
        if not written:
            with TaskLedger(pg_target) as ledger:
                ledger.create_task(TASK, idempotency_key="c1")
            written.append(max(_event_ids(pg_target)))

    with Database(pg_target) as db:
        coming = first + 1
        proved = prove_integrated(db, coming, wait_seconds=PATIENCE, pause=pause)
        assert written == [coming] and proved.event_id == coming
        head = current_tree_head(db)
        prove_inclusion(db, coming).check(head.root)
    refused = run_cli("--db", pg_target, "prove", "999", "--wait", "--timeout", "0")
    assert refused.returncode != 0 and "EVENT_NOT_FOUND" in refused.stderr


def test_a_proof_behind_a_full_batch_is_event_not_integrated_with_the_lag(pg_target: str) -> None:
    with TaskLedger(pg_target) as ledger:
        ledger.create_tasks((TASK, f"c{n}") for n in range(3))
    last = max(_event_ids(pg_target))
    with Database(pg_target) as db:
        integrator = Integrator(db, batch=1)
        with pytest.raises(LedgerError, match=r"^EVENT_NOT_INTEGRATED.*appended 1 event"):
            prove_integrated(db, last, integrator=integrator)
        integrator.catch_up()
        assert prove_integrated(db, last, integrator=integrator).event_id == last


def test_the_served_app_integrates_in_the_background_and_reports_the_lag(pg_target: str) -> None:
    with Database(pg_target) as db:
        token = issue_token(db, "auditor-1", ["auditor"])["token"]
    app = served_app(ApiSettings(db_path=pg_target))
    try:
        http = TestClient(app, base_url="http://127.0.0.1")
        bearer = {"Authorization": f"Bearer {token}"}
        with TaskLedger(pg_target) as ledger:
            ledger.create_task(TASK, idempotency_key="c")
        event_id = max(_event_ids(pg_target))
        answer = http.get(f"/v1/proofs/inclusion/{event_id}", headers=bearer)
        assert answer.status_code == 200, answer.text
        with Database(pg_target) as db:
            deadline = _deadline()
            while current_tree_head(db).size < len(_event_ids(pg_target)):
                assert _before(deadline), "the background integrator appended nothing"
                threading.Event().wait(0.01)
        ready = http.get("/v1/ready").json()["integration"]
        assert ready["inline"] is False and ready["tree_size"] == len(_event_ids(pg_target))
        status = http.get("/v1/status", headers=bearer).json()["integration"]
        assert set(status) >= {"lag_events", "lag_seconds", "settled_event_id"}
    finally:
        app.state.backend.close()


def _deadline() -> float:
    return time.monotonic() + PATIENCE


def _before(deadline: float) -> bool:
    return time.monotonic() < deadline


def test_verify_counts_an_event_committed_after_it_integrated_as_pending(
    pg_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event committed between verify's integration and its walk has no leaf yet: pending,
    not a finding."""
    from aios_ledger.shell.log import verification

    with TaskLedger(pg_target) as ledger:
        ledger.create_task(TASK, idempotency_key="before")

    def integrate_then_write(db: Database) -> Any:
        done = integrate(db)
        with TaskLedger(pg_target) as ledger:
            ledger.create_task(TASK, idempotency_key="during")
        return done

    monkeypatch.setattr(verification, "integrate", integrate_then_write)
    with Database(pg_target) as db:
        report = verify_log(db)
        assert report.intact, report.findings
        assert report.leaves_pending == 1
        assert current_tree_head(db).size == 1


def test_the_integrate_command_on_both_engines(ledger_target: str | Path) -> None:
    with TaskLedger(ledger_target) as ledger:
        ledger.create_tasks((TASK, f"c{n}") for n in range(3))
    done = run_cli("--db", str(ledger_target), "integrate")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    if is_postgres(ledger_target):
        assert answer["inline"] is False and answer["appended"] == 3
        assert answer["tree_size"] == 3
    else:
        assert answer == {"engine": "sqlite", "inline": True, "tree_size": 3}
