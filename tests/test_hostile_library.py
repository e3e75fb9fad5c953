"""Every public entry point of the library under hostile arguments: junk of any Python shape,
near-valid requests with one field replaced, dropped or added, huge strings and numbers, deep
nesting, lone surrogates, SQL metacharacters. Each call answers, or raises a LedgerError; a
write that raises leaves the database exactly as it was (or, a refusal that is part of the
record, adds its one sealed `*_REFUSED` event), and the event log stays intact.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core import GovernedExecutionBinding, LedgerError
from aios_ledger.core.auxiliary import AuxiliaryCapabilityProfile, AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.jsonvalue import check_json, loads_document
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
from aios_ledger.shell import (
    AUTHORIZATION_ENV,
    AuxiliaryRunService,
    Database,
    InitialExecutionProjectionStore,
    RunEvidenceReader,
    RunStore,
    TaskLedger,
    register_binding,
    verify_export,
    verify_log,
)
from aios_ledger.shell.auxiliary.service import list_auxiliary_runs, read_auxiliary_run
from aios_ledger.shell.log.cli import parse_head_argument
from conftest import both_engines
from faults_support import SOAK
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_fixtures import (
    OWNER,
    TASK,
    binding,
    dump,
    legacy_database,
    on_engine,
    projection_mapping,
    recovery_mapping,
    resolver,
)

EXAMPLES = 3000 if SOAK else 200
SQL = "'; DROP TABLE tasks; --"
DEEP: Any = json.loads("[" * 200 + "]" * 200)

texts = st.text(st.characters(blacklist_categories=()), max_size=30) | st.sampled_from(
    ["", " ", SQL, "\ud800", "a\x00b", "x" * 100_000, "../../etc/passwd", TASK, "run-1"]
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1])
    | st.floats()
    | texts
    | st.binary(max_size=8)
    | st.builds(object)
    | st.just(DEEP)
)
junk = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(texts | st.integers(), inner, max_size=3)
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=10,
)


@st.composite
def near(draw: st.DrawFn, valid: dict[str, Any], *, keywords: bool = False) -> dict[str, Any]:
    """One field replaced (keyword arguments), or also dropped or added (mappings)."""
    document = dict(valid)
    actions = ["replace"] if keywords else ["replace", "replace", "drop", "add"]
    action = draw(st.sampled_from(actions))
    key = draw(st.sampled_from(sorted(document)))
    if action == "replace":
        document[key] = draw(junk)
    elif action == "drop":
        del document[key]
    else:
        document[draw(texts)] = draw(junk)
    return document


def _spec_mapping(evidence: Any) -> dict[str, Any]:
    return AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "fixture", "inspect", evidence.snapshot_digest
    ).public()


class Answer:
    async def execute(self, context: Any) -> Any:
        return {"ok": True}


pytest_generate_tests = both_engines


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger_target: Path
) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    ledger = TaskLedger(path)
    claim = None
    ledger.create_task({"task_id": "t1", "goal": "g", "instructions": "i"}, idempotency_key="c1")
    claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=3600, task_id="t1")
    runs = RunStore(path)
    runs.create_run("session-1", "a prompt", run_id="run-1")
    evidence = RunEvidenceReader(runs).read(
        EvidenceReadRequest(ExecutionTarget("session-1", "run-1"))
    )
    db = Database(path)
    store = InitialExecutionProjectionStore(path, resolver)
    yield {
        "path": path,
        "tmp": tmp_path,
        "ledger": ledger,
        "token": claim["lease_token"] if claim else "",
        "runs": runs,
        "evidence": evidence,
        "db": db,
        "store": store,
    }
    for closable in (ledger, runs, db, store):
        closable.close()


def _spawn(path: Path, spec: Any, evidence: Any) -> Any:
    async def scenario() -> Any:
        service = AuxiliaryRunService(Answer(), path)
        try:
            handle = await service.spawn(spec, evidence)
            return await handle.wait()
        finally:
            await service.aclose()

    return asyncio.run(scenario())


def _calls(world: dict[str, Any]) -> dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], Any]]]:
    ledger: TaskLedger = world["ledger"]
    runs: RunStore = world["runs"]
    db: Database = world["db"]
    store: InitialExecutionProjectionStore = world["store"]
    token: str = world["token"]
    evidence = world["evidence"]
    spec = _spec_mapping(evidence)
    task = {"task_id": "t-new", "goal": "g", "instructions": "i", "priority": 1}
    tmp: Path = world["tmp"]
    return {
        "task create": (near(task), lambda v: ledger.create_task(v, idempotency_key="k-new")),
        "task create key": (junk, lambda v: ledger.create_task(task, idempotency_key=v)),
        "task create many": (junk, ledger.create_tasks),
        "claim": (
            near(
                {"agent_id": "w2", "capabilities": [], "lease_seconds": 5, "task_id": TASK},
                keywords=True,
            ),
            lambda v: ledger.claim(**v),
        ),
        "claim many": (
            near(
                {"agent_id": "w2", "capabilities": [], "lease_seconds": 5, "limit": 2},
                keywords=True,
            ),
            lambda v: ledger.claim_many(**v),
        ),
        "submit batch": (
            st.lists(
                near({"task_id": "t1", "lease_token": token, "result": {}, "idempotency_key": "s"}),
                max_size=3,
            )
            | junk,
            ledger.submit_results,
        ),
        "verify batch": (
            st.lists(
                near(
                    {"task_id": "t1", "decision": "FAILED", "reason": "r", "idempotency_key": "v"}
                ),
                max_size=3,
            )
            | junk,
            ledger.verify_results,
        ),
        "heartbeat": (
            near({"task_id": "t1", "lease_token": token, "lease_seconds": 5}, keywords=True),
            lambda v: ledger.heartbeat(**v),
        ),
        "release": (
            near({"task_id": "t1", "lease_token": token, "reason": "stop"}, keywords=True),
            lambda v: ledger.release(**v),
        ),
        "submit": (
            near(
                {"task_id": "t1", "lease_token": token, "result": {}, "idempotency_key": "s"},
                keywords=True,
            ),
            lambda v: ledger.submit_result(**v),
        ),
        "verify": (
            near(
                {"task_id": "t1", "decision": "FAILED", "reason": "r", "idempotency_key": "v"},
                keywords=True,
            ),
            lambda v: ledger.verify(**v),
        ),
        "cancel": (
            near({"task_id": "t1", "reason": "r", "idempotency_key": "x"}, keywords=True),
            lambda v: ledger.cancel(**v),
        ),
        "task reads": (junk, lambda v: (ledger.get(v), ledger.events(v), ledger.list_tasks(v))),
        "task list limit": (junk, lambda v: ledger.list_tasks(limit=v)),
        "run create": (
            near({"session_id": "s", "prompt": "p", "run_id": "run-new"}, keywords=True),
            lambda v: runs.create_run(**v),
        ),
        "run append": (
            near({"run_id": "run-1", "kind": "k", "payload": {}}, keywords=True),
            lambda v: runs.append_event(**v),
        ),
        "run reads": (junk, lambda v: (runs.get_run(v), runs.run_events("run-1", limit=v))),
        "run events": (junk, runs.run_events),
        "evidence": (
            near(
                {"session_id": "session-1", "run_id": "run-1", "max_events": 5, "max_bytes": 99},
                keywords=True,
            ),
            lambda v: RunEvidenceReader(runs).read(
                EvidenceReadRequest(
                    ExecutionTarget(v.get("session_id"), v.get("run_id")),
                    max_events=v.get("max_events", 5),
                    max_bytes=v.get("max_bytes", 99),
                )
            ),
        ),
        "evidence request": (junk, RunEvidenceReader(runs).read),
        "aux spec": (near(spec), AuxiliaryRunSpec.from_mapping),
        "aux profile": (
            near(AuxiliaryCapabilityProfile.tool_free().public()),
            AuxiliaryCapabilityProfile.from_mapping,
        ),
        "aux frame": (junk, ExecutionFrame.from_mapping),
        "aux spawn": (
            near(spec),
            lambda v: _spawn(world["path"], AuxiliaryRunSpec.from_mapping(v), evidence),
        ),
        "aux spawn junk": (junk, lambda v: _spawn(world["path"], v, evidence)),
        "aux reads": (
            junk,
            lambda v: (read_auxiliary_run(db, v), list_auxiliary_runs(db, session_id=v)),
        ),
        "aux list": (junk, lambda v: list_auxiliary_runs(db, state=v, limit=v)),
        "binding": (near(binding().public()), lambda v: register_binding(db, v)),
        "binding junk": (junk, lambda v: register_binding(db, v)),
        "binding record": (near(attrs.asdict(binding())), GovernedExecutionBinding.from_mapping),
        "projection": (
            near(projection_mapping()),
            lambda v: store.project(TASK, InitialExecutionProjectionRequest.from_mapping(v)),
        ),
        "recovery": (
            near(recovery_mapping()),
            lambda v: store.project_from_source_capture(
                TASK, SourceCaptureProjectionRecoveryRequest.from_mapping(v)
            ),
        ),
        "projection args": (junk, lambda v: store.project(v, v)),
        "head": (junk, LedgerHead.from_mapping),
        "head text": (texts, parse_head_argument),
        "json": (junk, check_json),
        "json text": (st.binary(max_size=64) | texts, loads_document),
        "export file": (
            st.binary(max_size=256) | texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
            lambda v: verify_export(_write(tmp / "export.jsonl", v)),
        ),
    }


# What recording a refused attempt writes: its sealed event, keyed by the request's key.
REFUSAL_RECORD = {
    "events",
    "event_seals",
    "event_seal_rows",
    "merkle_leaves",
    "merkle_tree",
    "sqlite_sequence",
    "task_idempotency",
}


def _only_its_refusal_recorded(before: list[str], after: list[str], refused: LedgerError) -> bool:
    """A refusal that is part of the record (a projection refused past its authorization)
    changes the database by its one `*_REFUSED` event, naming its code, and nothing else."""
    gone, added = set(before) - set(after), set(after) - set(before)
    events = [line for line in added if line.startswith("events: ")]
    return (
        len(events) == 1
        and "_REFUSED'" in events[0]
        and f'"code":"{refused.code}"' in events[0]
        and {line.split(":", 1)[0] for line in gone} <= {"merkle_tree", "sqlite_sequence"}
        and {line.split(":", 1)[0] for line in added} <= REFUSAL_RECORD
    )


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_every_public_entry_point_under_hostile_arguments(world: dict[str, Any]) -> None:
    calls = _calls(world)
    path: Path = world["path"]
    seen: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(calls)), label="entry point")
        strategy, call = calls[name]
        value = data.draw(strategy, label="argument")
        before = dump(path)
        try:
            call(value)
        except LedgerError as refused:
            seen[refused.code] = seen.get(refused.code, 0) + 1
            after = dump(path)
            assert after == before or _only_its_refusal_recorded(before, after, refused), (
                name,
                refused,
            )
            return
        seen["answered"] = seen.get("answered", 0) + 1

    check()
    with Database(path) as db:
        assert verify_log(db).intact
    print(f"\nhostile library: {sum(seen.values())} calls, outcomes {dict(sorted(seen.items()))}")


def test_a_refused_open_leaves_no_file_open(tmp_path: Path) -> None:
    """Opening a file that is no database is refused; the connection does not stay open (with
    its descriptor and locks) for as long as someone holds the error."""
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all " * 400)
    fds = Path("/proc/self/fd")
    before = len(list(fds.iterdir()))
    kept: list[LedgerError] = []
    for _ in range(50):
        with pytest.raises(LedgerError) as refused:
            TaskLedger(garbage)
        assert refused.value.code == "DATABASE_CORRUPT"
        kept.append(refused.value)
    assert len(list(fds.iterdir())) - before < 5
