"""The queue benchmark's adapter (bench/queue_harness) speaks the harness's protocol: given the
`ENQUEUE <n>` lines the harness writes on its stdin, it creates that many tasks, claims, submits
and verifies each one, and writes the descriptor and the metric records the harness parses
(CONTRIBUTING_ADAPTERS.md of hardbyte/postgresql-job-queue-benchmarking). In process, on a
SQLite file: no harness run."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

from aios_ledger.shell import TaskLedger

from bench.queue_harness.adapter import Settings, parse_token, percentiles, run

# The metrics every sample tick carries (replica 0 adds the observer's two).
REQUIRED_METRICS = {
    "claim_p50_ms",
    "claim_p95_ms",
    "claim_p99_ms",
    "enqueue_rate",
    "completion_rate",
    "queue_depth",
}
# A bound on waiting for the adapter's threads, never a speed assertion.
PATIENCE_S = 60.0


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line]


def test_tokens_become_verified_tasks_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    settings = Settings.from_env(
        {
            "DATABASE_URL": str(path),
            "BENCH_INSTANCE_ID": "0",
            "WORKER_COUNT": "4",
            "LEDGER_CLAIM_THREADS": "2",
            "JOB_WORK_MS": "0",
            "SAMPLE_EVERY_S": "1",
            "PRODUCER_PACING": "harness",
            "PRODUCER_MODE": "fixed",
        }
    )
    # What the harness's pacer writes, with a line it does not write, which is ignored.
    tokens = io.StringIO("ENQUEUE 3\nsomething else\nENQUEUE 2\n")
    out = io.StringIO()
    stop = threading.Event()
    replica = threading.Thread(target=run, args=(settings, tokens, out, stop))
    replica.start()
    try:
        with TaskLedger(path) as ledger:
            deadline = time.monotonic() + PATIENCE_S
            while time.monotonic() < deadline:
                done = ledger.list_tasks("SUCCEEDED")
                samples = [r for r in records(out) if r.get("kind") == "adapter"]
                completed = sum(r["value"] for r in samples if r["metric"] == "completion_rate")
                metrics = {r["metric"] for r in samples}
                if len(done) == 5 and metrics >= REQUIRED_METRICS and completed > 0:
                    break
                time.sleep(0.05)
            assert len(done) == 5
            assert ledger.list_tasks() == done  # nothing else was created
            events = [e["event_type"] for e in ledger.events(done[0]["task_id"])]
            assert events == ["TASK_CREATED", "TASK_CLAIMED", "RESULT_SUBMITTED", "TASK_VERIFIED"]
            actor = ledger.events(done[0]["task_id"])[0]["actor"]
            assert actor is not None and actor["name"] == "queue-harness-0"
    finally:
        stop.set()
        replica.join(PATIENCE_S)
    assert not replica.is_alive()

    lines = records(out)
    descriptor = lines[0]
    assert descriptor["kind"] == "descriptor"
    assert descriptor["system"] == "aios-ledger"
    assert descriptor["instance_id"] == 0
    assert set(descriptor["event_tables"]) >= {"aios_ledger.tasks", "aios_ledger.events"}
    samples = [r for r in lines[1:] if r["kind"] == "adapter"]
    assert {r["metric"] for r in samples} >= REQUIRED_METRICS
    for sample in samples:
        assert sample["system"] == "aios-ledger"
        assert sample["subject_kind"] == "adapter"
        assert isinstance(sample["value"], float)
    # The jobs counted: enqueued, completed, and a claim latency measured from enqueue time.
    for metric in ("enqueue_rate", "completion_rate", "claim_p99_ms"):
        assert any(r["value"] > 0 for r in samples if r["metric"] == metric), metric


def test_replicas_other_than_zero_leave_the_observers_metrics_out(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"DATABASE_URL": str(tmp_path / "q.db"), "BENCH_INSTANCE_ID": "1", "SAMPLE_EVERY_S": "1"}
    )
    out = io.StringIO()
    stop = threading.Event()
    replica = threading.Thread(target=run, args=(settings, io.StringIO(""), out, stop))
    replica.start()
    try:
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline and not any(
            r.get("kind") == "adapter" for r in records(out)
        ):
            time.sleep(0.05)
    finally:
        stop.set()
        replica.join(PATIENCE_S)
    metrics = {r["metric"] for r in records(out) if r.get("kind") == "adapter"}
    assert "claim_p99_ms" in metrics
    assert metrics.isdisjoint({"queue_depth", "producer_target_rate"})


def test_only_enqueue_lines_are_tokens() -> None:
    assert parse_token("ENQUEUE 128\n") == 128
    assert parse_token("ENQUEUE x") is None
    assert parse_token("enqueue 3") is None
    assert parse_token("") is None


def test_percentiles_by_nearest_rank() -> None:
    assert percentiles([]) == (0.0, 0.0, 0.0)
    assert percentiles([float(n) for n in range(1, 101)]) == (51.0, 95.0, 99.0)
