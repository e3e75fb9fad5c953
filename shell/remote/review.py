"""`review --api`: the reviewer's backend over the HTTP API, and the store that keeps its
auxiliary runs there.

The review command runs here under the same `AuxiliaryRunService` as locally; only where the
runs are kept differs, the server deciding each move. Evidence from the server is rebuilt here
and its digest recomputed, so a server cannot hand over evidence other than what it pinned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aios_ledger.core import LedgerError, TaskView
from aios_ledger.core.auxiliary import (
    AuxiliaryRunRow,
    AuxiliaryStopRequest,
    AuxiliaryTransitionRequest,
    CheckedSpawn,
    SpawnAnswer,
)
from aios_ledger.core.jsonvalue import dumps_canonical
from aios_ledger.core.runs import EvidenceSnapshot, ExecutionTarget, RunEventRow, RunRow
from aios_ledger.shell.auxiliary.service import AuxiliaryExecutor, AuxiliaryRunService
from aios_ledger.shell.remote.client import LedgerClient, api_path


def evidence_from_public(raw: object) -> EvidenceSnapshot:
    """An evidence snapshot from its `public()` form, its digest checked."""
    try:
        assert isinstance(raw, dict)
        target = ExecutionTarget.from_mapping(raw["target"])
        run_view, limits = raw["run"], raw["limits"]
        events = tuple(
            RunEventRow(
                run_id=target.run_id,
                seq=int(event["seq"]),
                kind=str(event["kind"]),
                payload_json=dumps_canonical(event["payload"]),
                created_at=str(event["created_at"]),
            )
            for event in raw["events"]
        )
        run = RunRow(
            run_id=str(run_view["run_id"]),
            session_id=str(run_view["session_id"]),
            prompt=str(run_view["prompt"]),
            event_count=len(events),  # not pinned: evidence covers the run's fixed fields
            created_at=str(run_view["created_at"]),
            updated_at=str(run_view["created_at"]),
        )
        snapshot = EvidenceSnapshot(
            target=target,
            run=run,
            events=events,
            truncated=bool(raw["truncated"]),
            max_events=int(limits["max_events"]),
            max_bytes=int(limits["max_bytes"]),
            snapshot_digest=str(raw["snapshot_digest"]),
            schema=str(raw["schema"]),
            tail_events=int(limits.get("tail_events", 0)),
        )
    except (AssertionError, KeyError, TypeError, ValueError, LedgerError) as exc:
        raise LedgerError("API_PROTOCOL_ERROR", f"not an evidence snapshot: {exc}") from None
    if snapshot.computed_digest() != snapshot.snapshot_digest:
        raise LedgerError("API_PROTOCOL_ERROR", "the evidence does not match its digest")
    return snapshot


def _row(raw: object) -> AuxiliaryRunRow:
    if not isinstance(raw, dict):
        raise LedgerError("API_PROTOCOL_ERROR", "expected an auxiliary run row")
    try:
        return AuxiliaryRunRow.from_row(raw)
    except (LedgerError, TypeError, KeyError) as exc:
        raise LedgerError("API_PROTOCOL_ERROR", f"not an auxiliary run row: {exc}") from None


class RemoteAuxiliaryRuns:
    """An `AuxiliaryRunStore` behind the API's review-run routes."""

    def __init__(self, client: LedgerClient) -> None:
        self._client = client

    def recover(self, owner_is_dead: Callable[[str], bool]) -> tuple[str, ...]:
        return ()  # the server's runs are not this process's to judge

    def spawn(self, checked: CheckedSpawn, evidence: EvidenceSnapshot, owner: str) -> SpawnAnswer:
        body = {
            "spec": checked.spec.public(),
            "evidence": {
                "target": evidence.target.public(),
                "max_events": evidence.max_events,
                "max_bytes": evidence.max_bytes,
                "tail_events": evidence.tail_events,
            },
            "owner": owner,
        }
        return cast(SpawnAnswer, self._client.call_json("POST", api_path("review-runs"), body=body))

    def move(self, request: AuxiliaryTransitionRequest) -> AuxiliaryRunRow:
        body: dict[str, Any] = {"state": str(request.target)}
        if request.output is not None:
            body["output"] = request.output.value
        if request.error is not None:
            body["error"] = {"code": request.error.code, "detail": request.error.detail}
        path = api_path("review-runs", request.aux_id, "transition")
        return _row(self._client.call_json("POST", path, body=body, retry="connect"))

    def stop(self, request: AuxiliaryStopRequest) -> None:
        body = {"code": request.error.code, "detail": request.error.detail}
        path = api_path("review-runs", request.aux_id, "stop")
        self._client.call_json("POST", path, body=body, retry="connect")

    def read(self, aux_id: str) -> AuxiliaryRunRow:
        return _row(self._client.call_json("GET", api_path("review-runs", aux_id)))

    def close(self) -> None:
        pass  # the client is the backend's


class RemoteReview:
    """A review round's reads and writes through the API (a reviewer's token)."""

    def __init__(self, client: LedgerClient) -> None:
        self._client = client
        self.verify = client.verify  # the task's verdict is the client's own call

    def candidates(self, limit: int) -> list[TaskView]:
        answer = self._client.call_json(
            "GET", api_path("review-candidates"), params={"limit": str(limit)}
        )
        return cast(list[TaskView], answer)

    def reviews_of(self, task_id: str, attempt: int) -> list[AuxiliaryRunRow]:
        params = {"task_id": task_id, "attempt": str(attempt)}
        answer = self._client.call_json("GET", api_path("review-runs"), params=params)
        if not isinstance(answer, list):
            raise LedgerError("API_PROTOCOL_ERROR", "expected a list of runs")
        return [_row(raw) for raw in answer]

    def evidence(self, task_id: str, attempt: int) -> EvidenceSnapshot:
        body = {"task_id": task_id, "attempt": attempt}
        raw = self._client.call_json("POST", api_path("review-evidence"), body=body)
        return evidence_from_public(raw)

    def service(self, executor: AuxiliaryExecutor) -> AuxiliaryRunService:
        return AuxiliaryRunService(executor, store=RemoteAuxiliaryRuns(self._client))

    def close(self) -> None:
        self._client.close()
