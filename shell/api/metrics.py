"""The server's Prometheus metrics, in a registry of its own per app, so that two apps in one
process never share counters.

Labels are bounded: a request is counted by its route template, never its path, and nothing is
labelled with a token, a task id or a body; spend per task is `/v1/spend`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class _TaskCounts(Collector):
    """Tasks by status, read when scraped (a failing read reports nothing, not stale counts)."""

    def __init__(self, read: Callable[[], Mapping[str, int]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("aios_ledger_tasks", "Tasks by status", labels=["status"])
        for status, count in sorted(self._read().items()):
            family.add_metric([status], count)
        yield family


# The spend counters by agent and repository: the report's sum, the metric and its help.
_SPEND_COUNTERS = (
    ("input_tokens", "aios_ledger_spend_input_tokens", "Input tokens reported, by agent"),
    ("output_tokens", "aios_ledger_spend_output_tokens", "Output tokens reported, by agent"),
    ("reports", "aios_ledger_spend_reports", "Results that reported their usage"),
    (
        "over_budget",
        "aios_ledger_over_budget_results",
        "Results whose usage took their task past its budget",
    ),
)
_SUMS = ("reports", "input_tokens", "output_tokens", "cost_micros", "over_budget")


class _Spend(Collector):
    """The spend report as counters by agent and repository and gauges by day."""

    def __init__(self, read: Callable[[], Mapping[str, Any]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        report = self._read()
        where = ["agent", "repository"]
        counters = [
            (sum_name, CounterMetricFamily(name, text, labels=where))
            for sum_name, name, text in _SPEND_COUNTERS
        ]
        cost = CounterMetricFamily(
            "aios_ledger_spend_cost_micros",
            "Cost reported, in millionths of the currency's unit, by agent",
            labels=[*where, "currency"],
        )
        rows = report.get("by_agent_and_repository", ())
        by_currency = _summed(rows, "agent_id", "repository", "currency")
        for (agent, repository, currency), sums in sorted(by_currency.items()):
            if currency:
                cost.add_metric([agent, repository, currency], sums["cost_micros"])
        for labels, sums in sorted(_summed(rows, "agent_id", "repository").items()):
            for sum_name, family in counters:
                family.add_metric(list(labels), sums[sum_name])
        day_cost = GaugeMetricFamily(
            "aios_ledger_spend_day_cost_micros",
            "Cost reported on a UTC day, in millionths of the currency's unit",
            labels=["day", "currency"],
        )
        day_tokens = GaugeMetricFamily(
            "aios_ledger_spend_day_tokens",
            "Tokens reported on a UTC day",
            labels=["day", "direction"],
        )
        for row in report.get("by_day", ()):
            if row["currency"]:
                day_cost.add_metric([str(row["day"]), str(row["currency"])], row["cost_micros"])
        for (day,), sums in sorted(_summed(report.get("by_day", ()), "day").items()):
            day_tokens.add_metric([day, "input"], sums["input_tokens"])
            day_tokens.add_metric([day, "output"], sums["output_tokens"])
        families = [family for _, family in counters]
        yield from (*families[:2], cost, *families[2:], day_cost, day_tokens)


def _summed(rows: Iterable[Mapping[str, Any]], *by: str) -> dict[tuple[str, ...], dict[str, int]]:
    """The sums of the rows of each value of the columns `by`."""
    sums: dict[tuple[str, ...], dict[str, int]] = {}
    for row in rows:
        key = tuple(str(row[name] or "") for name in by)
        entry = sums.setdefault(key, dict.fromkeys(_SUMS, 0))
        for name in _SUMS:
            entry[name] += int(row[name])
    return sums


class ApiMetrics:
    def __init__(
        self,
        task_counts: Callable[[], Mapping[str, int]],
        spend: Callable[[], Mapping[str, Any]],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "aios_ledger_http_requests",
            "HTTP requests by route template, method and status code",
            ["route", "method", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "aios_ledger_http_request_seconds",
            "HTTP request latency by route template",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "aios_ledger_group_commit_batch_size",
            "Requests applied in one commit",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.waiting = Gauge(
            "aios_ledger_waiting_claims", "Long-poll claims waiting now", registry=self.registry
        )
        self.registry.register(_TaskCounts(task_counts))
        self.registry.register(_Spend(spend))

    def observe_request(self, route: str, method: str, code: int, seconds: float) -> None:
        self.requests.labels(route, method, str(code)).inc()
        self.latency.labels(route, method).observe(seconds)
