"""Listing auxiliary runs, oldest first; a limit out of range is refused, never clamped."""

from __future__ import annotations

from typing import Annotated

import attrs
from aios_ledger.core.auxiliary.states import AuxiliaryRunState
from aios_ledger.core.kinds import Between, Identifier
from aios_ledger.core.structuring import Structured

MAX_AUXILIARY_LIST = 1000
DEFAULT_AUXILIARY_LIST = 100


@attrs.frozen
class AuxiliaryRunListRequest(Structured):
    state: AuxiliaryRunState | None = None
    session_id: Identifier | None = None
    run_id: Identifier | None = None
    limit: Annotated[int, Between(1, MAX_AUXILIARY_LIST)] = DEFAULT_AUXILIARY_LIST
