"""`verify` started from the console: one run at a time per server, on a thread of its own since
a walk of the whole log can take minutes, its progress kept in memory for the Log page."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.shell.api.backend import Backend
from aios_ledger.shell.clock import read_clock
from aios_ledger.shell.log.verification import verify_log

LOG = logging.getLogger("aios_ledger.console")


@attrs.frozen
class VerifyRun:
    """The latest run: how far it is (`done` of `total` events), and its report or refusal."""

    started_by: str
    started_at: str
    done: int = 0
    total: int = 0
    finished_at: str | None = None
    report: dict[str, Any] | None = None
    refused: str | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def public(self) -> dict[str, Any]:
        """The progress endpoint's answer: no findings list (the page shows those)."""
        shown = attrs.asdict(self, filter=lambda field, _: field.name != "report")
        intact = None if self.report is None else self.report["intact"]
        return {**shown, "running": self.running, "intact": intact}


class VerifyRunner:
    """The console's verify runs over one backend, one at a time (one runner per console)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._clock = backend.settings.clock
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-verify")
        self._latest: VerifyRun | None = None

    @property
    def latest(self) -> VerifyRun | None:
        with self._lock:
            return self._latest

    def start(self, started_by: str) -> VerifyRun:
        with self._lock:
            if self._latest is not None and self._latest.running:
                raise LedgerError("VERIFY_RUNNING", "a verify run is under way: wait for it")
            self._latest = VerifyRun(started_by=started_by, started_at=self._now())
            run = self._latest
        self._executor.submit(self._run)
        return run

    def _now(self) -> str:
        return read_clock(self._clock).text

    def _update(self, **changes: Any) -> None:
        with self._lock:
            assert self._latest is not None
            self._latest = attrs.evolve(self._latest, **changes)

    def _run(self) -> None:
        def progress(done: int, total: int) -> None:
            self._update(done=done, total=total)

        try:
            report = self._backend.read_now(lambda s: verify_log(s.db, progress=progress))
        except LedgerError as refused:
            self._update(finished_at=self._now(), refused=f"{refused.code}: {refused.detail}")
        except Exception:
            # A defect: the page says the run failed, the server's log says why.
            LOG.exception("the console's verify run failed")
            self._update(finished_at=self._now(), refused="INTERNAL_ERROR: see the server's log")
        else:
            self._update(finished_at=self._now(), report=report.public())
