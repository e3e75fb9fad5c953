"""The Log page (`/log`): the Merkle tree's head, the latest `verify` run (which an auditor or
the owner starts), the newest signed checkpoints and the archives taken."""

from __future__ import annotations

import json
from typing import Any

from aios_ledger.core.actors import AUDITOR, OWNER
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.db.merkle import tree_head_at
from aios_ledger.shell.web.console import Page, Rendered, Visit, see_other
from aios_ledger.shell.web.verify_runs import VerifyRunner
from starlette.responses import JSONResponse, Response

VERIFIERS = frozenset({AUDITOR, OWNER})
SHOWN = 20
# A run's findings on the page: the first few (their counts by code are all shown).
FINDINGS_SHOWN = 50
ARCHIVE_FIELDS = ("archive_sha256", "finished_before", "tasks", "events")


def _archive(row: Any) -> dict[str, Any]:
    payload = json.loads(str(row["payload_json"]))
    shown = {name: payload.get(name) for name in ARCHIVE_FIELDS}
    return {"event_id": row["event_id"], "created_at": row["created_at"], **shown}


def _checkpoint(row: Any) -> dict[str, Any]:
    return {**row, "root_hash": bytes(row["root_hash"]).hex()}


def _verify_runs(visit: Visit) -> VerifyRunner:
    runs: VerifyRunner = visit.request.app.state.console.verify_runs
    return runs


def log_page(visit: Visit) -> Rendered:
    def read(stores: Any) -> dict[str, Any]:
        def rows(conn: Any) -> dict[str, Any]:
            return {
                "checkpoints": [
                    _checkpoint(row)
                    for row in fetch_all(conn, "console_checkpoints_recent", {"limit": SHOWN})
                ],
                "archives": [
                    _archive(row)
                    for row in fetch_all(conn, "console_archive_history", {"limit": SHOWN})
                ],
            }

        return {"head": tree_head_at(stores.db).public(), **stores.db.read(rows)}

    run = _verify_runs(visit).latest
    return Rendered(
        "log.html",
        {
            **visit.backend.read_now(read),
            "run": run,
            "findings_shown": FINDINGS_SHOWN,
            "may_verify": visit.viewer.may(VERIFIERS),
        },
    )


def start_verify(visit: Visit) -> Response:
    _verify_runs(visit).start(visit.viewer.principal.name)
    return see_other("/log")


def verify_progress(visit: Visit) -> Response:
    run = _verify_runs(visit).latest
    return JSONResponse(
        {"run": None if run is None else run.public()}, headers={"Cache-Control": "no-store"}
    )


PAGES = (
    Page("/log", "logPage", log_page, READERS, nav="Log"),
    Page("/log/verify", "startVerify", start_verify, VERIFIERS, methods=("POST",)),
    Page("/log/verify/progress", "verifyProgress", verify_progress, READERS),
)
