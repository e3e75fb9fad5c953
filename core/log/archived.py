"""Accounting for archived events while verifying: the `archived_events` listings are held
against the sealed `TASKS_ARCHIVED` event that removed them, so that a listing forged to let a
hand-made DELETE through is reported.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, loads_document
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import AUXILIARY_RUNS, GOVERNED_BINDINGS, RUN_EVENTS
from aios_ledger.core.log.seals import chain_of
from aios_ledger.core.records import record_from_row

TASKS_ARCHIVED = "TASKS_ARCHIVED"
TASKS_RESTORED = "TASKS_RESTORED"
# The state tables whose rows of a task seals of the ledger chain cover: an archive removes them
# with the task, and its TASKS_ARCHIVED event records each of them (`ledger_rows_record`).
LEDGER_SEALED_TABLES = (AUXILIARY_RUNS, GOVERNED_BINDINGS, RUN_EVENTS)
# Before format 3 an archive deleted its tasks' governed bindings unrecorded: a binding of a chain
# such an archive recorded is gone for good, and accounted for by that alone.
ARCHIVE_FORMAT_FIELD = "archive_format"
BINDINGS_KEPT_FORMAT = 3


@attrs.frozen(order=True)
class LedgerSealedRow:
    """A row of an archived task that a ledger-chain seal covers, with its last seal's event."""

    table: str
    key: str
    event_id: int


def ledger_rows_record(rows: Iterable[LedgerSealedRow]) -> list[JsonValue]:
    """One chain's ledger-sealed rows as TASKS_ARCHIVED records them, `[table, key, event_id]`."""
    return [[row.table, row.key, row.event_id] for row in sorted(rows)]


def recorded_ledger_rows(payload: object) -> dict[str, frozenset[LedgerSealedRow]]:
    """Each chain's ledger-sealed rows a TASKS_ARCHIVED payload records; malformed ones left out."""
    found: dict[str, frozenset[LedgerSealedRow]] = {}
    if not isinstance(payload, Mapping) or not isinstance(payload.get("chains"), list):
        return found
    for item in payload["chains"]:
        if not isinstance(item, Mapping) or not isinstance(item.get("task_id"), str):
            continue
        listed = item.get("ledger_rows")
        if not isinstance(listed, list):
            continue
        rows = set()
        for entry in listed:
            match entry:
                case [str() as table, str() as key, int() as event_id] if type(event_id) is int:
                    rows.add(LedgerSealedRow(table, key, event_id))
        found[chain_of(item["task_id"])] = frozenset(rows)
    return found


@attrs.frozen
class ArchivedEventRow:
    """An event an archive removed, and the TASKS_ARCHIVED event that removed it."""

    event_id: int
    archive_event_id: int
    chain: str
    seal: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ArchivedEventRow:
        return record_from_row(cls, row)


@attrs.frozen
class ArchivedChainEnd:
    """A removed chain's last event and seal, as an archive event's payload records it."""

    last_event_id: int
    last_seal: str


def recorded_chains(payload: object) -> dict[str, ArchivedChainEnd] | None:
    """The chains a TASKS_ARCHIVED payload records, by chain name; None when it is malformed."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("chains"), list):
        return None
    found: dict[str, ArchivedChainEnd] = {}
    for item in payload["chains"]:
        if not isinstance(item, Mapping):
            return None
        task_id, last_id, seal = (
            item.get(name) for name in ("task_id", "last_event_id", "last_seal")
        )
        if not (isinstance(task_id, str) and type(last_id) is int and isinstance(seal, str)):
            return None
        found[chain_of(task_id)] = ArchivedChainEnd(last_id, seal)
    return found


def is_archive_event(event: EventRow) -> bool:
    return event.task_id is None and event.event_type == TASKS_ARCHIVED


def is_restore_event(event: EventRow) -> bool:
    return event.task_id is None and event.event_type == TASKS_RESTORED


class ArchiveAccount:
    """The archived chains met so far, grouped by the archive event that lists them, until that
    event comes by (its id is larger, so it always comes later)."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[str, ArchivedChainEnd]] = {}
        # Chains an archive event recorded and no listing holds, awaiting their restore.
        self._restorable: dict[tuple[int, str], ArchivedChainEnd] = {}

    def listed(self, event_id: int, chain: object, seal: object, archive_event_id: int) -> None:
        chains = self._pending.setdefault(archive_event_id, {})
        chains[str(chain)] = ArchivedChainEnd(event_id, str(seal))

    def close(self, event: EventRow) -> list[str]:
        """What disagrees between the listings under `event` and its payload (empty: none)."""
        listed = self._pending.pop(event.event_id, {})
        recorded = recorded_chains(event.payload())
        if recorded is None:
            return ["the TASKS_ARCHIVED payload does not record its chains"]
        problems = [
            f"{chain}: listed as archived up to event {end.last_event_id}, "
            f"the archive event records {_end_text(recorded.get(chain))}"
            for chain, end in sorted(listed.items())
            if recorded.get(chain) != end
        ]
        for chain in sorted(set(recorded) - set(listed)):
            self._restorable[(event.event_id, chain)] = recorded[chain]
        return problems

    def restored(self, event: EventRow) -> list[str]:
        """What disagrees between a TASKS_RESTORED event and the chains awaiting it."""
        payload = event.payload()
        chains = recorded_chains(payload)
        archive_event_id = payload.get("archive_event_id") if isinstance(payload, dict) else None
        if chains is None or type(archive_event_id) is not int:
            return ["the TASKS_RESTORED payload does not record its archive event and chains"]
        problems = []
        for chain, end in sorted(chains.items()):
            awaited = self._restorable.pop((archive_event_id, chain), None)
            if awaited != end:
                problems.append(
                    f"{chain}: recorded as restored from archive event {archive_event_id} up "
                    f"to event {end.last_event_id}, which recorded {_end_text(awaited)} "
                    "awaiting restore"
                )
        return problems

    def unclaimed(self, archive_event_id: int) -> list[str]:
        """Listings under an event id that is not a sealed TASKS_ARCHIVED event."""
        chains = self._pending.pop(archive_event_id, None)
        if chains is None:
            return []
        return [
            f"{chain}: listed as archived by event {archive_event_id}, which is not a sealed "
            "TASKS_ARCHIVED event"
            for chain in sorted(chains)
        ]

    def remaining(self) -> list[tuple[int, str]]:
        """Listings whose archive event never came by: (archive event id, detail)."""
        found = [
            (archive_event_id, problem)
            for archive_event_id in sorted(self._pending)
            for problem in self.unclaimed(archive_event_id)
        ]
        found.extend(
            (
                archive_event_id,
                f"{chain}: recorded as archived, but no archived event of it is "
                "listed, and no TASKS_RESTORED event restored it",
            )
            for archive_event_id, chain in sorted(self._restorable)
        )
        self._restorable.clear()
        return sorted(found)


def _end_text(end: ArchivedChainEnd | None) -> str:
    if end is None:
        return "nothing of it"
    return f"event {end.last_event_id} with seal {end.last_seal}"


def chains_without_bindings(payload: object) -> set[str]:
    """The chains whose governed bindings a TASKS_ARCHIVED event before format 3 deleted unkept."""
    if isinstance(payload, Mapping):
        kept = payload.get(ARCHIVE_FORMAT_FIELD)
        if type(kept) is int and kept >= BINDINGS_KEPT_FORMAT:
            return set()
    return set(recorded_chains(payload) or ())


def removed_by_archives(
    payloads: Iterable[object], listed: Container[str] | None = None
) -> tuple[set[str], set[LedgerSealedRow]]:
    """The chains without bindings and the ledger-sealed rows TASKS_ARCHIVED payloads account for
    (with `listed`, only those of the chains still listed as archived)."""
    without_bindings: set[str] = set()
    ledger_rows: set[LedgerSealedRow] = set()
    for payload in payloads:
        without_bindings.update(chains_without_bindings(payload))
        for chain, rows in recorded_ledger_rows(payload).items():
            if listed is None or chain in listed:
                ledger_rows.update(rows)
    return without_bindings, ledger_rows


def archive_removed(
    table: str,
    key: str,
    event_id: int,
    without_bindings: Container[str],
    ledger_rows: Container[LedgerSealedRow],
) -> bool:
    """Whether a sealed row that is gone left with an archive (`removed_by_archives`)."""
    if table == GOVERNED_BINDINGS and chain_of(key.split(" ", 1)[0]) in without_bindings:
        return True
    return LedgerSealedRow(table, key, event_id) in ledger_rows


def payload_of(text: object) -> object:
    """An archive or restore event's payload text read as JSON; None when it is not."""
    try:
        return loads_document(text, what="an archive event") if isinstance(text, str) else None
    except LedgerError:
        return None


def archive_summary(payload: Any) -> Mapping[str, Any] | None:
    """The digest and chains a TASKS_ARCHIVED payload records, or None when malformed."""
    chains = recorded_chains(payload)
    if chains is None or not isinstance(payload.get("archive_sha256"), str):
        return None
    return {"archive_sha256": payload["archive_sha256"], "chains": chains}
