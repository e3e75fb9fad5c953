"""The export format of the sealed log: JSON lines (docs/conformance.md), checked offline by the
same verifier. The trailer holds the rolling head digest, so that a cut or edited file is noticed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.log.archived import (
    BINDINGS_KEPT_FORMAT,
    LEDGER_SEALED_TABLES,
    ArchivedEventRow,
    LedgerSealedRow,
    archive_removed,
    is_archive_event,
    payload_of,
    removed_by_archives,
)
from aios_ledger.core.log.chained import ChainedRowFold
from aios_ledger.core.log.records import SEAL_VERSION_5, EventRow, SealRow
from aios_ledger.core.log.rows import (
    TASK_PROPOSALS,
    TASKS,
    RowImage,
)
from aios_ledger.core.log.state import held_row_problem
from aios_ledger.core.log.tables import SealedTables
from aios_ledger.core.log.verification import (
    EXPORT_INVALID,
    STATE_MISMATCH,
    ChainLink,
    Finding,
    LedgerHead,
    LogVerifier,
    VerificationReport,
    bundle_finding,
)
from aios_ledger.core.records import record_columns

EXPORT_SCHEMA = "aios.event_export.v1"
MAX_LINE_BYTES = 8 * 1024 * 1024
EVENT_FIELDS = record_columns(EventRow)
# Absent from a line written before events named their actors.
ACTOR_FIELD = "actor"
SEAL_FIELDS = ("chain", "chain_seq", "prev_seal", "seal", "sealed_at_adoption", "seal_version")
# The seal's chained row columns: on every sealed event's line.
CHAINED_FIELDS = ("row_changes", "chained_row_digest")
# An export or archive a 0.x ledger wrote holds its older seals, which 1.0 does not verify.
EXPORT_OF_0X_SEALS = "EXPORT_OF_0X_SEALS"
ROWS_FIELD = "rows"
STATE_FIELDS = frozenset(("state", "key", "digest"))


def export_header(task_id: str | None, *, dense_ids: bool = True) -> dict[str, Any]:
    """The first line; a store whose ids have gaps by design says so, for the offline check."""
    if task_id is not None:
        return {"schema": EXPORT_SCHEMA, "scope": "task", "task_id": task_id}
    return {"schema": EXPORT_SCHEMA, "scope": "all", **({} if dense_ids else {"dense_ids": False})}


# An archive's format 1 (no field in the header) holds its rows' digests alone, format 2 the
# rows, and format 3 (the one written) also its tasks' governed bindings.
ROWS_KEPT_FORMAT = 2
ARCHIVE_FORMAT = BINDINGS_KEPT_FORMAT
ARCHIVE_FORMATS = frozenset((ROWS_KEPT_FORMAT, ARCHIVE_FORMAT))
ROW_FIELD = "row"


def archive_header(finished_before: str) -> dict[str, Any]:
    return {
        "schema": EXPORT_SCHEMA,
        "scope": "archive",
        "finished_before": finished_before,
        "format": ARCHIVE_FORMAT,
    }


def export_line(
    event: EventRow, seal: SealRow | None, rows: Sequence[RowImage] = ()
) -> dict[str, Any]:
    line: dict[str, Any] = event.public()
    if seal is None:
        line.update(dict.fromkeys(SEAL_FIELDS))
        line[ROWS_FIELD] = None
    else:
        line.update(seal.public())
        line[ROWS_FIELD] = [image.public() for image in rows]
    return line


ARCHIVED_FIELDS = frozenset(("archived", "archive_event_id", "chain", "seal"))


def export_archived_line(row: ArchivedEventRow) -> dict[str, Any]:
    return {
        "archived": row.event_id,
        "archive_event_id": row.archive_event_id,
        "chain": row.chain,
        "seal": row.seal,
    }


def parse_archived_line(raw: Mapping[str, Any]) -> tuple[int, int, str, str]:
    event_id, archive_event_id = raw.get("archived"), raw.get("archive_event_id")
    chain, seal = raw.get("chain"), raw.get("seal")
    if (
        set(raw) != ARCHIVED_FIELDS
        or type(event_id) is not int
        or type(archive_event_id) is not int
        or not isinstance(chain, str)
        or not isinstance(seal, str)
    ):
        raise LedgerError("EXPORT_INVALID", "an archived line must hold its ids, chain and seal")
    return event_id, archive_event_id, chain, seal


def export_state_line(
    table: str, key: str, digest: str | None, row: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A state line; an archive's (format 2) carries the row's columns too."""
    line: dict[str, Any] = {"state": table, "key": key, "digest": digest}
    if row is not None:
        line[ROW_FIELD] = dict(row)
    return line


BUNDLE_FIELDS = frozenset(("bundle", "part", "parts", "data"))
# The bytes of a bundle a line carries at most (base64 makes 4/3 of it, under MAX_LINE_BYTES).
BUNDLE_PART_BYTES = 4 * 1024 * 1024


def export_bundle_lines(bundle_sha256: str, data: bytes) -> list[dict[str, Any]]:
    """An archived proposal's bundle file as lines after the state lines."""
    parts = [data[at : at + BUNDLE_PART_BYTES] for at in range(0, len(data), BUNDLE_PART_BYTES)]
    return [
        {
            "bundle": bundle_sha256,
            "part": number,
            "parts": len(parts),
            "data": base64.b64encode(part).decode("ascii"),
        }
        for number, part in enumerate(parts or [b""])
    ]


class ArchivedBundles:
    """The bundle lines of an archive, each bundle's parts in a row: what they hash to, and
    their bytes when `keep`."""

    def __init__(self, *, keep: bool = False) -> None:
        self._keep = keep
        self._hashers: dict[str, Any] = {}
        self._data: dict[str, list[bytes]] = {}
        self._next: dict[str, tuple[int, int]] = {}
        self.complete: dict[str, str] = {}  # bundle name -> hex sha256 of its bytes

    def add(self, raw: Mapping[str, Any]) -> None:
        name, part, parts, data = (raw.get(field) for field in ("bundle", "part", "parts", "data"))
        if (
            set(raw) != BUNDLE_FIELDS
            or not isinstance(name, str)
            or type(part) is not int
            or type(parts) is not int
            or not isinstance(data, str)
        ):
            raise LedgerError("EXPORT_INVALID", "a bundle line must hold its name, part and data")
        expected = self._next.get(name, (0, parts))
        if (part, parts) != expected or name in self.complete or not 0 <= part < parts:
            raise LedgerError("EXPORT_INVALID", f"bundle {name[:80]}: part {part} out of order")
        try:
            chunk = base64.b64decode(data.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise LedgerError("EXPORT_INVALID", f"bundle {name[:80]}: data is not base64") from None
        hasher = self._hashers.setdefault(name, hashlib.sha256())
        hasher.update(chunk)
        if self._keep:
            self._data.setdefault(name, []).append(chunk)
        if part + 1 == parts:
            self.complete[name] = hasher.hexdigest()
            self._next.pop(name, None)
        else:
            self._next[name] = (part + 1, parts)

    def data(self, name: str) -> bytes:
        return b"".join(self._data.get(name, ()))

    def findings(self, proposals: Mapping[str, str]) -> list[Finding]:
        """Each archived proposal's bundle (proposal id -> the bundle its row names) held
        against the bytes the file carries; a bundle cut short is missing."""
        found = (
            bundle_finding(proposal_id, recorded, self.complete.get(recorded))
            for proposal_id, recorded in sorted(proposals.items())
        )
        return [finding for finding in found if finding is not None]


def export_trailer(head: LedgerHead) -> dict[str, Any]:
    return {
        "end": EXPORT_SCHEMA,
        "events": head.events,
        "last_event_id": head.last_event_id,
        "digest": head.digest,
    }


@attrs.frozen
class ExportHeader:
    scope: str
    task_id: str | None
    dense_ids: bool = True
    # An archive's format (1: digests alone, 2: rows too); 0 for any other export.
    archive_format: int = 0
    finished_before: str | None = None

    @property
    def holds_state(self) -> bool:
        """Whether state lines follow the events (every scope but one task's)."""
        return self.scope != "task"


def parse_export_header(raw: object) -> ExportHeader:
    if not isinstance(raw, Mapping) or raw.get("schema") != EXPORT_SCHEMA:
        raise LedgerError("EXPORT_INVALID", f"the first line is not an {EXPORT_SCHEMA} header")
    scope, fields = raw.get("scope"), set(raw) - {"schema", "scope"}
    if scope == "all" and (not fields or (fields == {"dense_ids"} and raw["dense_ids"] is False)):
        return ExportHeader(scope="all", task_id=None, dense_ids=not fields)
    finished_before, archive_format = raw.get("finished_before"), raw.get("format", 1)
    if (
        scope == "archive"
        and isinstance(finished_before, str)
        and fields - {"format"} == {"finished_before"}
        and type(archive_format) is int
        and archive_format in (ARCHIVE_FORMATS if "format" in fields else {1})
    ):
        return ExportHeader(
            "archive", None, archive_format=archive_format, finished_before=finished_before
        )
    task_id = raw.get("task_id")
    if scope == "task" and isinstance(task_id, str) and fields == {"task_id"}:
        return ExportHeader(scope="task", task_id=task_id)
    raise LedgerError("EXPORT_INVALID", "the header's scope is not all, a task or an archive")


def parse_export_trailer(raw: Mapping[str, Any]) -> LedgerHead:
    if raw.get("end") != EXPORT_SCHEMA or set(raw) != {"end", "events", "last_event_id", "digest"}:
        raise LedgerError("EXPORT_INVALID", "the trailer is malformed")
    try:
        return LedgerHead.from_mapping({key: raw[key] for key in raw if key != "end"})
    except LedgerError as refused:
        raise LedgerError("EXPORT_INVALID", f"the trailer is malformed: {refused.detail}") from None


def line_of_kind(raw: object, field: str) -> TypeGuard[Mapping[str, Any]]:
    """Whether a line is of the kind `field` names: `end` (the trailer), `state`, `archived`
    or `bundle`."""
    return isinstance(raw, Mapping) and field in raw


def parse_state_line(
    raw: Mapping[str, Any], *, with_row: bool = False
) -> tuple[str, str, str | None]:
    """A state line's table, key and digest; `with_row`: an archive's, which holds its row."""
    table, key, digest = raw.get("state"), raw.get("key"), raw.get("digest")
    if (
        set(raw) != (STATE_FIELDS | {ROW_FIELD} if with_row else STATE_FIELDS)
        or not isinstance(table, str)
        or not isinstance(key, str)
        or not (digest is None or isinstance(digest, str))
    ):
        what = "table, key, digest and row" if with_row else "table, key and digest"
        raise LedgerError("EXPORT_INVALID", f"a state line must hold its {what}")
    return table, key, digest


def _parse_rows(raw: object, event_id: int) -> tuple[RowImage, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(
        isinstance(item, Mapping) and set(item) == {"table", "key", "digest"} for item in raw
    ):
        raise LedgerError("EXPORT_INVALID", f"event {event_id}: rows must be table/key/digest")
    return tuple(RowImage(item["table"], item["key"], item["digest"]) for item in raw)


def parse_export_event(raw: object) -> tuple[EventRow, SealRow | None, tuple[RowImage, ...]]:
    """One event line, its shape checked; its content's types are the verifier's to check."""
    fields = set(EVENT_FIELDS) | set(SEAL_FIELDS) | {ROWS_FIELD}
    shapes = (fields, fields | set(CHAINED_FIELDS))
    if not isinstance(raw, Mapping) or (set(raw) | {ACTOR_FIELD}) not in shapes:
        raise LedgerError("EXPORT_INVALID", "an event line must hold exactly the export fields")
    if ACTOR_FIELD not in raw:  # written before events named their actors
        raw = {**raw, ACTOR_FIELD: None}
    event_id = raw["event_id"]
    if not isinstance(event_id, int) or isinstance(event_id, bool) or event_id < 1:
        raise LedgerError("EXPORT_INVALID", "event_id must be a positive integer")
    event = EventRow.from_row(raw)
    if all(raw[name] is None for name in SEAL_FIELDS):
        return event, None, ()
    adoption = raw["sealed_at_adoption"]
    if not isinstance(adoption, bool):
        raise LedgerError("EXPORT_INVALID", f"event {event_id}: sealed_at_adoption must be a bool")
    seal = SealRow.from_row(raw)  # sealed_at_adoption: a bool, checked above
    version = seal.seal_version
    if type(version) is int and version != SEAL_VERSION_5 and 1 <= version <= 4:
        raise LedgerError(
            EXPORT_OF_0X_SEALS,
            f"event {event_id} has a v{version} seal: the file was written by a 0.x ledger, "
            "whose seals 1.0 does not verify (verify or restore it with that release; "
            "`aios-ledger upgrade` seals the ledger's own log again)",
        )
    return event, seal, _parse_rows(raw[ROWS_FIELD], event_id)


class ExportState:
    """The state rows an export's seals say were written last, held against the export's
    state lines as `verify` holds them against the database."""

    def __init__(self, tables: SealedTables, *, archive: bool = False) -> None:
        # An archive's rows that seals of the ledger chain cover (its tasks' run events and
        # reviews) have no seal in the file: `verify-archive` holds them against the ledger's.
        self._archive = archive
        self._sealed: dict[tuple[str, str], tuple[int, str]] = {}
        self._chains_with_events: set[str] = set()
        self._adopted_history = False
        self._seen: set[tuple[str, str]] = set()
        # The tables whose rows an older ledger wrote before sealing them: an unsealed row of
        # one is unprovable while the export holds an event of that kind before its first image.
        self._sealed_since: set[str] = set()
        self._unsealed_writers = {
            table.name: table.unsealed_writer
            for table in tables.values()
            if table.unsealed_writer is not None
        }
        self._unsealed_before: set[str] = set()
        self._chains_without_bindings: set[str] = set()
        self._archived_rows: set[LedgerSealedRow] = set()
        # The task chains, each folded into the row its seals say was written.
        self._folds: dict[str, ChainedRowFold] = {}

    def advance(self, event: EventRow, seal: SealRow | None, rows: Sequence[RowImage]) -> None:
        if seal is None:
            return
        if isinstance(event.task_id, str):
            self._chains_with_events.add(event.task_id)
        if seal.sealed_at_adoption:
            self._adopted_history = True
        if is_archive_event(event):
            without_bindings, ledger_rows = removed_by_archives([payload_of(event.payload_json)])
            self._chains_without_bindings.update(without_bindings)
            self._archived_rows.update(ledger_rows)
        for table, kind in self._unsealed_writers.items():
            if table not in self._sealed_since and kind(event):
                self._unsealed_before.add(table)
        for image in rows:
            self._sealed[(image.table, image.key)] = (event.event_id, image.digest)
            self._sealed_since.add(image.table)
        if isinstance(seal.chain, str) and seal.chain.startswith("task:"):
            key = seal.chain.removeprefix("task:")
            fold = self._folds.get(key)
            if fold is None:
                fold = self._folds[key] = ChainedRowFold(key)
            fold.add(seal.event_id, seal.row_changes, seal.chained_row_digest)

    def check(self, verifier: LogVerifier, table: str, key: str, digest: str | None) -> None:
        self._seen.add((table, key))
        if self._archive and table in LEDGER_SEALED_TABLES and (table, key) not in self._sealed:
            return
        sealed: tuple[int, str | None] | None = self._sealed.get((table, key))
        if table == TASKS:
            history = key in self._chains_with_events
            sealed = verifier.last_task_seal(self._folds.get(key), sealed)
        else:
            history = self._adopted_history or table in self._unsealed_before
        verifier.check_row(table, key, digest, sealed, history=history)

    def finish(self, verifier: LogVerifier) -> None:
        gone: dict[tuple[str, str], tuple[int, str | None]] = dict(self._sealed)
        for key, fold in self._folds.items():
            if fold.event_id is not None:
                last = gone.get((TASKS, key))
                if last is None or last[0] < fold.event_id:
                    gone[(TASKS, key)] = (fold.event_id, None)
        for (table, key), (event_id, _) in sorted(gone.items()):
            if (table, key) not in self._seen and not archive_removed(
                table, key, event_id, self._chains_without_bindings, self._archived_rows
            ):
                verifier.check_row_gone(table, key, event_id)


class ChainTips:
    """The last seal seen per chain, for checking an export offline (one entry per chain)."""

    def __init__(self) -> None:
        self._tips: dict[str, ChainLink] = {}

    def predecessor(self, seal: SealRow | None) -> ChainLink | None:
        if seal is None or not isinstance(seal.chain, str):
            return None
        return self._tips.get(seal.chain)

    def advance(self, seal: SealRow | None) -> None:
        if seal is None or not isinstance(seal.chain, str):
            return
        seq, value = seal.chain_seq, seal.seal
        if isinstance(seq, int) and not isinstance(seq, bool) and isinstance(value, str):
            self._tips[seal.chain] = ChainLink(event_id=seal.event_id, chain_seq=seq, seal=value)


def verify_export_lines(
    lines: Iterable[bytes | str], tables: SealedTables, bundles: ArchivedBundles | None = None
) -> VerificationReport:
    """Check an export, line by line, with the ledger's own verifier and no database. A malformed
    line is an `EXPORT_INVALID` finding; a file a 0.x ledger wrote is refused. `bundles` takes
    an archive's bundle lines (a restore keeps their bytes)."""
    numbered = enumerate(lines, start=1)
    first = next(numbered, None)
    header = parse_export_header(None if first is None else parse_line(first[1], 1))
    verifier = LogVerifier(dense_ids=header.scope == "all" and header.dense_ids)
    tips = ChainTips()
    state = ExportState(tables, archive=header.scope == "archive")
    state_lines = bundle_lines = False
    bundles = ArchivedBundles() if bundles is None else bundles
    proposals: dict[str, str] = {}
    trailer_seen = False
    last_id = 0
    for number, raw_line in numbered:
        try:
            value = parse_line(raw_line, number)
            if trailer_seen:
                raise LedgerError("EXPORT_INVALID", "a line after the trailer")
            if line_of_kind(value, "end"):
                trailer_seen = True
                _check_trailer(verifier, parse_export_trailer(value))
                continue
            if line_of_kind(value, "state") and header.holds_state:
                if bundle_lines:
                    raise LedgerError("EXPORT_INVALID", "a state line after the bundle lines")
                state_lines = True
                with_row = header.archive_format >= ROWS_KEPT_FORMAT
                table, key, digest = parse_state_line(value, with_row=with_row)
                if with_row:
                    problem = held_row_problem(tables, table, key, digest, value[ROW_FIELD])
                    if problem is not None:
                        verifier.note(Finding(STATE_MISMATCH, None, problem, table=table, key=key))
                    row = value[ROW_FIELD]  # not a JSON object: a finding above, not a crash
                    bundle = row.get("bundle_sha256") if isinstance(row, Mapping) else None
                    if table == TASK_PROPOSALS and isinstance(bundle, str):
                        proposals[key] = bundle
                state.check(verifier, table, key, digest)
                continue
            if line_of_kind(value, "bundle") and header.archive_format >= ROWS_KEPT_FORMAT:
                bundle_lines = True
                bundles.add(value)
                continue
            if state_lines:
                raise LedgerError("EXPORT_INVALID", "an event line after the state lines")
            if line_of_kind(value, "archived") and header.scope == "all":
                archived_id, archive_event_id, chain, archived_seal = parse_archived_line(value)
                if archived_id <= last_id:
                    raise LedgerError("EXPORT_INVALID", f"event {archived_id} out of order")
                last_id = archived_id
                verifier.archived(archived_id, chain, archived_seal, archive_event_id)
                continue
            event, seal, rows = parse_export_event(value)
            if event.event_id <= last_id:
                raise LedgerError("EXPORT_INVALID", f"event {event.event_id} out of order")
            if header.task_id is not None and event.task_id != header.task_id:
                raise LedgerError(
                    "EXPORT_INVALID", f"event {event.event_id} is not of the exported task"
                )
        except LedgerError as refused:
            if refused.code == EXPORT_OF_0X_SEALS:
                raise
            verifier.note(Finding(EXPORT_INVALID, None, f"line {number}: {refused.detail}"))
            continue
        last_id = event.event_id
        verifier.feed(event.event_id, event, seal, tips.predecessor(seal), rows)
        tips.advance(seal)
        state.advance(event, seal, rows)
    if header.holds_state:
        state.finish(verifier)
    for finding in bundles.findings(proposals):
        verifier.note(finding)
    if not trailer_seen:
        verifier.note(Finding(EXPORT_INVALID, None, "no trailer: the export was cut short"))
    return verifier.finish()


def parse_line(line: bytes | str, number: int) -> object:
    # Text that is not UTF-8 (a lone surrogate) stays undecodable, for the parser to refuse.
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_LINE_BYTES:
        raise LedgerError("EXPORT_INVALID", f"line {number} is over {MAX_LINE_BYTES} bytes")
    return loads_document(raw.rstrip(b"\n"), what=f"line {number}")


def _check_trailer(verifier: LogVerifier, trailer: LedgerHead) -> None:
    lines = verifier.head()
    if lines != trailer:
        detail = (
            f"the trailer says {trailer.events} events up to {trailer.last_event_id} with "
            f"digest {trailer.digest}; the lines give {lines.public()}"
        )
        verifier.note(Finding(EXPORT_INVALID, None, detail))
