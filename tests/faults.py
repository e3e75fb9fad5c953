"""An apsw VFS shim that fails the Nth read, write or sync — once, or from then on.

It inherits every operation from the default VFS and only interposes a counter, so what SQLite
sees is a real file system that goes wrong at a chosen moment (an I/O error, or a full disk).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import apsw

OPERATIONS = ("read", "write", "sync")


class FaultPlan:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.injected = 0
        self._armed: dict[str, tuple[int, bool, bool]] = {}

    def arm(
        self, operation: str, nth: int, *, persistent: bool = False, full: bool = False
    ) -> None:
        self.calls.clear()
        self._armed = {operation: (nth, persistent, full)}

    def disarm(self) -> None:
        self._armed = {}

    def check(self, operation: str) -> None:
        self.calls[operation] += 1
        armed = self._armed.get(operation)
        if armed is None:
            return
        nth, persistent, full = armed
        count = self.calls[operation]
        if count == nth or (persistent and count > nth):
            self.injected += 1
            if full:
                raise apsw.FullError(f"injected: disk full at {operation} #{count}")
            raise apsw.IOError(f"injected: {operation} #{count} failed")


class FaultFile(apsw.VFSFile):
    def __init__(self, plan: FaultPlan, name: Any, flags: list[int]) -> None:
        self._plan = plan
        super().__init__("", name, flags)

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802 (apsw names)
        self._plan.check("read")
        return super().xRead(amount, offset)

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802 (apsw names)
        self._plan.check("write")
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:  # noqa: N802 (apsw names)
        self._plan.check("sync")
        super().xSync(flags)


class FaultVFS(apsw.VFS):
    def __init__(self, name: str, plan: FaultPlan) -> None:
        self._plan = plan
        self.vfs_name = name
        super().__init__(name, "")

    def xOpen(self, name: Any, flags: list[int]) -> FaultFile:  # noqa: N802 (apsw names)
        return FaultFile(self._plan, name, flags)
