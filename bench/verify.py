"""Part 6: event log `verify` against a plain read-and-hash loop over the same rows (NORMAL).

The log is built once through the real sealing path (`bench_verify.build`); each repetition
runs the plain loop and `verify_log`, interleaved.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.verification import verify_log

from .bench_verify import build, plain_read_and_hash
from .harness import Size, figure, interleaved_values, paired_ratio, sized, summary


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    events = sized(size, full=200_000, quick=20_000, smoke=500)
    with Database(scratch / "verify.db", synchronous="NORMAL") as db:
        build(db, events)

        def plain() -> float:
            rows, seconds = plain_read_and_hash(db)
            return rows / seconds

        def verify() -> float:
            start = time.perf_counter()
            report = verify_log(db)
            seconds = time.perf_counter() - start
            if not report.intact:
                raise RuntimeError(f"the benchmark log is not intact: {report.finding_counts}")
            return report.events / seconds

        values = interleaved_values({"verify": verify, "plain": plain}, reps)
    ratio = paired_ratio(values["verify"], values["plain"])
    return [
        figure(
            "6 verify",
            "verify",
            summary(values["verify"]),
            "events/s",
            note=f"{events:,} events",
        ),
        figure("6 verify", "plain read+sha256", summary(values["plain"]), "events/s"),
        figure("6 verify", "verify / plain", ratio, "ratio"),
    ]
