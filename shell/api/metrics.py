"""The server's Prometheus metrics, in a registry of its own per app (two apps in one process,
as the tests run them, never share counters).

- `aios_ledger_http_requests_total{route, method, code}`: requests by route template (never the
  concrete path, which holds ids) and status code;
- `aios_ledger_http_request_seconds{route, method}`: latency histogram;
- `aios_ledger_tasks{status}`: tasks by status, read from the ledger at each scrape;
- `aios_ledger_group_commit_batch_size`: requests applied per commit. `observe_batch(size)` is
  what the group-commit writer calls once per commit.
- `aios_ledger_waiting_claims`: long polls waiting now.

Nothing here is labelled with a token, a token name, a task id or a body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
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


class ApiMetrics:
    def __init__(self, task_counts: Callable[[], Mapping[str, int]]) -> None:
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

    def observe_request(self, route: str, method: str, code: int, seconds: float) -> None:
        self.requests.labels(route, method, str(code)).inc()
        self.latency.labels(route, method).observe(seconds)

    def observe_batch(self, size: int) -> None:
        """One commit that applied `size` requests (the group-commit writer's hook)."""
        self.batch_size.observe(size)
