"""`serve` freezes its startup heap (`settle_startup_heap`), so that the collector's full
collections never walk it again: they paused every thread for 30-150 ms under load."""

from __future__ import annotations

import gc
from pathlib import Path

from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.serve.app import served_app, settle_startup_heap


def _tracked(target: object) -> bool:
    """Whether a collection of any generation would walk `target`."""
    return any(candidate is target for candidate in gc.get_objects())


def test_the_served_app_is_out_of_reach_of_collections_once_settled(tmp_path: Path) -> None:
    app = served_app(ApiSettings(db_path=str(tmp_path / "ledger.db")))
    document = app.state.openapi
    try:
        assert _tracked(document)
        settle_startup_heap()
        assert gc.get_freeze_count() > 0
        assert not _tracked(document)
        assert not _tracked(app.state.backend)
    finally:
        gc.unfreeze()
        app.state.backend.close()
