"""The Health page (`/health`): the queue's depth and throughput by hour, lease expiries, review
failures and group-commit batch sizes, as inline SVG charts with their tables.

The hourly figures read the newest HEALTH_WINDOW events only, so the page costs the same at any
ledger size; the queue's past depths are an estimate worked back from its depth now."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.transitions import (
    TASK_CLAIMED,
    TASK_CREATED,
    TASK_LEASE_EXPIRED,
    TASK_RELEASED,
    TASK_REQUEUED,
    TASK_VERIFIED,
    TaskStatus,
)
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.clock import read_clock
from aios_ledger.shell.db.connection import fetch_all, fetch_value
from aios_ledger.shell.web.charts import Chart, bar_chart
from aios_ledger.shell.web.console import Page, Rendered, Visit

HOURS = 24
HEALTH_WINDOW = 20_000
# What puts a task (back) into the queue, and what takes it out, for the depth worked back.
INTO_QUEUE = (TASK_CREATED, TASK_REQUEUED, TASK_RELEASED, TASK_LEASE_EXPIRED)


def hours_until(now: datetime) -> list[str]:
    """The last HOURS hours up to `now`'s, oldest first, as events' `created_at` starts."""
    hour = now.replace(minute=0, second=0, microsecond=0)
    return [(hour - timedelta(hours=back)).strftime("%Y-%m-%dT%H") for back in range(HOURS)][::-1]


def per_hour(hours: list[str], counts: Mapping[tuple[str, str], int], kind: str) -> list[int]:
    return [counts.get((hour, kind), 0) for hour in hours]


def queue_depths(queued_now: int, into: list[int], out: list[int]) -> list[int]:
    """The queue's depth at the end of each hour, worked back from `queued_now` (never below 0)."""
    depths = [queued_now]
    for came, went in zip(reversed(into[1:]), reversed(out[1:]), strict=True):
        depths.append(max(0, depths[-1] - came + went))
    return depths[::-1]


def batch_sizes(metrics: Any) -> list[tuple[str, int]]:
    cumulative = [
        (sample.labels["le"], int(sample.value))
        for family in metrics.batch_size.collect()
        for sample in family.samples
        if sample.name.endswith("_bucket")
    ]
    points, before = [], 0
    for bound, count in cumulative:
        label = "more" if bound == "+Inf" else f"≤ {float(bound):g}"
        points.append((label, count - before))
        before = count
    return points


def health_page(visit: Visit) -> Rendered:
    now = read_clock(visit.backend.settings.clock)
    hours = hours_until(datetime.fromisoformat(now.text.replace("Z", "+00:00")))

    def read(conn: Any) -> dict[str, Any]:
        after = max(0, int(fetch_value(conn, "log_max_event_id")) - HEALTH_WINDOW)
        counts = {
            (str(row["hour"]), str(row["event_type"])): int(row["events"])
            for row in fetch_all(conn, "console_event_counts", {"after": after})
        }
        verdicts = Counter(
            (str(row["created_at"])[:13], str(json.loads(str(row["payload_json"])).get("decision")))
            for row in fetch_all(conn, "console_verdicts", {"after": after})
        )
        queued = {str(row["status"]): int(row["tasks"]) for row in fetch_all(conn, "status_counts")}
        return {"counts": counts, "verdicts": verdicts, "queued": queued.get(TaskStatus.QUEUED, 0)}

    found = visit.backend.read_now(lambda stores: stores.db.read(read))
    counts, verdicts = found["counts"], found["verdicts"]
    rework = per_hour(hours, verdicts, VerifyDecision.NEEDS_REWORK)
    failed = per_hour(hours, verdicts, VerifyDecision.FAILED)
    # A verdict of rework puts the task back in the queue (while it has attempts left).
    arrivals = [per_hour(hours, counts, kind) for kind in INTO_QUEUE]
    into = [sum(hour) for hour in zip(rework, *arrivals, strict=True)]
    out = per_hour(hours, counts, TASK_CLAIMED)
    labels = [hour[11:13] + ":00" for hour in hours]

    def chart(title: str, unit: str, values: list[int], *, summed: bool = True) -> Chart:
        return bar_chart(title, unit, list(zip(labels, values, strict=True)), summed=summed)

    charts = [
        chart(
            "Queue depth at the end of each hour (estimated)",
            "tasks",
            queue_depths(found["queued"], into, out),
            summed=False,
        ),
        chart("Tasks created per hour", "tasks", per_hour(hours, counts, TASK_CREATED)),
        chart("Tasks claimed per hour", "claims", out),
        chart("Verdicts per hour (throughput)", "verdicts", per_hour(hours, counts, TASK_VERIFIED)),
        chart("Lease expiries per hour", "expiries", per_hour(hours, counts, TASK_LEASE_EXPIRED)),
        chart(
            "Review failures per hour (verdicts FAILED or NEEDS_REWORK)",
            "failures",
            [a + b for a, b in zip(rework, failed, strict=True)],
        ),
    ]
    batches = bar_chart(
        "Group-commit batch sizes since this server started",
        "commits",
        batch_sizes(visit.request.app.state.metrics),
    )
    return Rendered(
        "health.html",
        {
            "charts": charts,
            "batches": batches,
            "queued": found["queued"],
            "first_hour": hours[0],
            "window": HEALTH_WINDOW,
        },
    )


PAGES = (Page("/health", "healthPage", health_page, READERS, nav="Health"),)
