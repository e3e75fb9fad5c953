"""Logging for the command line: the `aios_ledger` loggers on stderr, as text lines or, for
services, one JSON object per line with the record's structured extras.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from aios_ledger.core.timestamps import Timestamp

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
ROOT = logging.getLogger("aios_ledger")

# Attributes every record has; anything else on a record came as an extra.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": Timestamp.from_datetime(datetime.fromtimestamp(record.created, UTC)).text,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update((key, value) for key, value in vars(record).items() if key not in _STANDARD)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=True)


def configure_logging(level: str, form: str) -> None:
    """One handler on today's stderr (a second call replaces the first's)."""
    for old in list(ROOT.handlers):
        ROOT.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    ROOT.addHandler(handler)
    ROOT.setLevel(level)
    ROOT.propagate = False
