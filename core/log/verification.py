"""Verifying the sealed event log, one row at a time, without I/O, so that memory does not grow
with the log. The head, a digest rolling over every event's seal, lets a head kept outside the
database show any later edit, even one that re-sealed its chain.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeAlias

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.kinds import Between, OneOf, PrefixedDigest
from aios_ledger.core.log.archived import ArchiveAccount, is_archive_event, is_restore_event
from aios_ledger.core.log.chained import ChainedRowFold
from aios_ledger.core.log.records import SEAL_VERSION_5, EventRow, SealRow
from aios_ledger.core.log.rows import TASKS, RowImage
from aios_ledger.core.log.seals import GENESIS_SEAL, ChainedRow, chain_of, seal_of_stored
from aios_ledger.core.structuring import Structured, refuse_as, structure

HEAD_SCHEMA = "aios.ledger_head.v1"
EMPTY_HEAD_DIGEST = "sha256:" + hashlib.sha256(HEAD_SCHEMA.encode("ascii")).hexdigest()
UNSEALED = "unsealed"

CONTENT_CHANGED = "CONTENT_CHANGED"
EVENT_REMOVED = "EVENT_REMOVED"
CHAIN_GAP = "CHAIN_GAP"
EVENT_REORDERED = "EVENT_REORDERED"
EVENT_SWAPPED = "EVENT_SWAPPED"
UNSEALED_EVENT = "UNSEALED_EVENT"
FORGED_EVENT = "FORGED_EVENT"
HEAD_MISMATCH = "HEAD_MISMATCH"
EXPORT_INVALID = "EXPORT_INVALID"
STATE_MISMATCH = "STATE_MISMATCH"
ARCHIVE_MISMATCH = "ARCHIVE_MISMATCH"
BUNDLE_MISSING = "BUNDLE_MISSING"
BUNDLE_CHANGED = "BUNDLE_CHANGED"
MERKLE_MISMATCH = "MERKLE_MISMATCH"
CHECKPOINT_MISMATCH = "CHECKPOINT_MISMATCH"
CHECKPOINT_FORGED = "CHECKPOINT_FORGED"
COSIGNATURE_FORGED = "COSIGNATURE_FORGED"

FINDING_CODES: Mapping[str, str] = {
    CONTENT_CHANGED: "the event's payload, type, timestamp, agent or task no longer matches "
    "its seal, while the seal itself is still a link of its chain",
    EVENT_SWAPPED: "two events' content (or seals) changed places: each verifies in the other's",
    EVENT_REMOVED: "an event is gone: its seal is left without it, its id is missing from the "
    "dense id sequence, or it was in a head and the log now ends before it",
    CHAIN_GAP: "the event's chain lacks the chain_seq just before it (its predecessor removed)",
    EVENT_REORDERED: "the event's chain predecessor has a larger event id (order disagrees)",
    UNSEALED_EVENT: "an event row without a seal: written outside the ledger",
    FORGED_EVENT: "a seal that is not a link of its chain (its prev_seal is not the chain's), "
    "or that is malformed: made outside the ledger, or its predecessor was re-sealed",
    HEAD_MISMATCH: "the log's count or rolling digest at the head's last event differs from the "
    "head: history up to the head was rewritten (even if re-sealed)",
    EXPORT_INVALID: "an export line that is not a well-formed event, or a missing/false trailer",
    STATE_MISMATCH: "a state row (task, auxiliary run, projection) differs from the row the last "
    "seal that wrote it covers, is gone while its seal says it was written, or was never "
    "written by a sealed event: changed, deleted or inserted behind the ledger's back",
    ARCHIVE_MISMATCH: "an event listed as archived that the TASKS_ARCHIVED event listing it does "
    "not record (or that is no such sealed event), a chain that event records but no listing "
    "holds and no TASKS_RESTORED event restored (or one restored that it did not record), or "
    "an archive file whose digest or chains the ledger did not record",
    BUNDLE_MISSING: "a proposal's stored bundle file is gone from the proposals folder: the "
    "proposal can no longer be written (restore the file from a backup)",
    BUNDLE_CHANGED: "a proposal's stored bundle file no longer has the sha256 its sealed "
    "proposal row records: changed on disk behind the ledger's back",
    MERKLE_MISMATCH: "the Merkle log disagrees with the seals or with itself: a leaf whose hash "
    "is not its event's seal's, an event without a leaf, a leaf without an event, a gap in "
    "the leaf indexes, a stored subtree that is not the hash of the leaves under it, or a "
    "tree head row that is not the tree's edge (docs/proofs.md)",
    CHECKPOINT_MISMATCH: "a stored checkpoint that the tree disagrees with: the stored leaves "
    "make another root at its size, or fewer leaves than it signs (the tree rewritten or cut "
    "under a signed checkpoint), or its note says another size, root or origin than its row "
    "(docs/checkpoints.md)",
    CHECKPOINT_FORGED: "a stored checkpoint whose note does not verify under the ledger's key "
    "(the key `verify` was given or configured with, named as the checkpoint's origin): "
    "signed by another key, or edited after it was signed",
    COSIGNATURE_FORGED: "a stored witness cosignature, by a witness `verify` was given or "
    "configured with, that does not verify over its checkpoint's body (made by another key, "
    "edited, or moved from another checkpoint), or whose line says another witness or time "
    "than its row (docs/checkpoints.md)",
}

MAX_FINDINGS = 1000


def bundle_finding(proposal_id: str, recorded: str, found: str | None) -> Finding | None:
    """The finding for a proposal's stored bundle whose file hashes to `found` (its hex sha256;
    None: the file is gone) while its row records `recorded`; None when they agree."""
    if found is None:
        detail = f"the stored bundle {recorded} of this proposal is missing"
        return Finding(BUNDLE_MISSING, None, detail, table="task_proposals", key=proposal_id)
    if found != recorded:
        detail = f"the stored bundle {recorded} of this proposal now hashes to {found}"
        return Finding(BUNDLE_CHANGED, None, detail, table="task_proposals", key=proposal_id)
    return None


SWAP_WINDOW = 64
RANGE_DETAIL_LIMIT = 100


@attrs.frozen
class ChainLink:
    """The seal before an event in its chain: three columns of that `SealRow` (the database
    joins chain_seq - 1 exactly; an offline check keeps the last one seen per chain)."""

    event_id: int
    chain_seq: int
    seal: str


@attrs.frozen
class Finding:
    code: str
    event_id: int | None
    detail: str
    chain: str | None = None
    chain_seq: int | None = None
    other_event_id: int | None = None
    table: str | None = None
    key: str | None = None

    def public(self) -> dict[str, Any]:
        return {key: value for key, value in attrs.asdict(self).items() if value is not None}


Count = Annotated[int, Between(0, 2**63 - 1)]


@attrs.frozen
class LedgerHead(Structured):
    """How far the log went when the head was taken: its count, last event id and the rolling
    digest of every `(event_id, seal)` up to it."""

    events: Count
    last_event_id: Count
    digest: Annotated[str, PrefixedDigest]
    schema: Annotated[str, OneOf((HEAD_SCHEMA,))] = HEAD_SCHEMA

    @classmethod
    def from_mapping(cls, raw: object) -> LedgerHead:
        head = structure(raw, cls, what="head", refuse=refuse_as(LedgerError, "HEAD_INVALID"))
        if (head.events == 0) != (head.last_event_id == 0):
            raise LedgerError("HEAD_INVALID", "an empty head has last_event_id 0, and only it")
        return head


def roll_head(digest: str, event_id: int, seal: str | None) -> str:
    """The next rolling head digest after one event (unsealed events roll in as such)."""
    hasher = hashlib.sha256(HEAD_SCHEMA.encode("ascii"))
    hasher.update(b"\0")
    hasher.update(f"{digest}\0{event_id}\0{seal if isinstance(seal, str) else UNSEALED}".encode())
    return "sha256:" + hasher.hexdigest()


@attrs.frozen(kw_only=True)
class VerificationReport:
    intact: bool
    events: int
    archived: int
    sealed: int
    sealed_at_adoption: int
    unsealed: int
    tolerated_adoption_gaps: int
    rows_checked: int
    rows_unprovable: int
    # The stored checkpoints held to the tree, and those whose signature verified under a key
    # the verifier knew (a log walked from the database; an export carries none).
    checkpoints_checked: int = 0
    checkpoint_signatures_checked: int = 0
    # The stored witness cosignatures verified under a witness key the verifier knew.
    cosignatures_checked: int = 0
    # Events committed after the verify began that the integrator had not appended yet: not
    # covered by the tree, and not a finding (PostgreSQL integrates after the commit).
    leaves_pending: int = 0
    head: LedgerHead
    head_checked: LedgerHead | None
    findings: tuple[Finding, ...]
    finding_counts: Mapping[str, int]
    findings_truncated: bool

    def public(self) -> dict[str, Any]:
        return {
            **attrs.asdict(self, recurse=False),
            "head": self.head.public(),
            "head_checked": None if self.head_checked is None else self.head_checked.public(),
            "findings": [finding.public() for finding in self.findings],
            "finding_counts": dict(sorted(self.finding_counts.items())),
        }


# A row read back from the database or an export may hold any value SQLite or JSON can: the
# records are typed as a valid row holds them, and these checks come before anything trusts them.


def _content_well_typed(event: EventRow) -> bool:
    return (
        isinstance(event.event_type, str)
        and isinstance(event.payload_json, str)
        and isinstance(event.created_at, str)
        and (event.task_id is None or isinstance(event.task_id, str))
        and (event.agent_id is None or isinstance(event.agent_id, str))
        and (event.actor is None or isinstance(event.actor, str))
    )


# How a seal of another version than v5 is checked, where one may be (a 0.x ledger's, which
# `upgrade` verifies with `core.log.legacy_seals.legacy_seal_verifies`): over the event, the seal
# (its types checked) and the rows it covers. Without one, such a seal is malformed.
LegacyCheck: TypeAlias = Callable[[EventRow, SealRow, Sequence[RowImage]], bool]


def _seal_well_formed(seal: SealRow, legacy: LegacyCheck | None) -> bool:
    return (
        isinstance(seal.chain, str)
        and isinstance(seal.chain_seq, int)
        and not isinstance(seal.chain_seq, bool)
        and seal.chain_seq >= 1
        and isinstance(seal.prev_seal, str)
        and isinstance(seal.seal, str)
        and type(seal.seal_version) is int
        and (seal.seal_version == SEAL_VERSION_5 or legacy is not None)
        and all(
            value is None or type(value) is str
            for value in (seal.row_changes, seal.chained_row_digest)
        )
    )


def _rows_well_typed(rows: Sequence[RowImage]) -> bool:
    return all(isinstance(text, str) for row in rows for text in (row.table, row.key, row.digest))


def seal_matches(
    event: EventRow,
    seal: SealRow,
    rows: Sequence[RowImage],
    event_id: int,
    legacy: LegacyCheck | None,
) -> bool:
    """Does `seal` verify over `event`'s content placed at `event_id`, and `rows`? A seal of
    another version than v5 only under `legacy`."""
    if not (_seal_well_formed(seal, legacy) and _content_well_typed(event)):
        return False
    if seal.chain != chain_of(event.task_id) or not _rows_well_typed(rows):
        return False
    if event_id != event.event_id:
        event = attrs.evolve(event, event_id=event_id)
    if seal.seal_version != SEAL_VERSION_5:
        return legacy is not None and legacy(event, seal, rows)
    chained = ChainedRow(seal.row_changes, seal.chained_row_digest)
    try:
        stored = seal_of_stored(event, seal.chain_seq, seal.prev_seal, rows, chained=chained)
        return bool(stored == seal.seal)
    except (LedgerError, ValueError):
        return False


class LogVerifier:
    """Feed `(event, seal, predecessor)` in strictly increasing event id; then `finish()`.

    `dense_ids`: the store hands out event ids without gaps, so a missing id is a removed event
    (but next to an event sealed at adoption: the older runtime's history may have had it).
    `head`: a head taken earlier, checked when the stream passes its last event. `legacy`: how
    a 0.x ledger's older seals are checked (`upgrade`'s first verify).
    """

    def __init__(
        self,
        *,
        dense_ids: bool = True,
        head: LedgerHead | None = None,
        legacy: LegacyCheck | None = None,
    ) -> None:
        self._dense_ids = dense_ids
        self._legacy = legacy
        self._head = head
        self._head_seen = head is None or head.last_event_id == 0
        self._events = 0
        self._archived = 0
        self._archive = ArchiveAccount()
        self._sealed = 0
        self._adopted = 0
        self._unsealed = 0
        self._tolerated_gaps = 0
        self._rows_checked = 0
        self._rows_unprovable = 0
        self._digest = EMPTY_HEAD_DIGEST
        self._last_id = 0
        self._last_adopted = False
        self._findings: list[Finding] = []
        self._counts: dict[str, int] = {}
        self._mismatches: deque[tuple[EventRow, SealRow, Sequence[RowImage]]] = deque(
            maxlen=SWAP_WINDOW
        )
        if head is not None and head.last_event_id == 0 and head.digest != EMPTY_HEAD_DIGEST:
            self.note(Finding(HEAD_MISMATCH, None, "an empty head with a non-empty digest"))

    def note(self, finding: Finding) -> None:
        """Add a finding (also one the feeder made itself: an offline export's malformed line)."""
        self._counts[finding.code] = self._counts.get(finding.code, 0) + 1
        if len(self._findings) < MAX_FINDINGS:
            self._findings.append(finding)

    def _retract(self, code: str, event_id: int) -> None:
        for index, finding in enumerate(self._findings):
            if finding.code == code and finding.event_id == event_id:
                del self._findings[index]
                self._counts[code] -= 1
                if not self._counts[code]:
                    del self._counts[code]
                return

    def _missing_ids(self, first: int, last: int, detail: str) -> None:
        """Report ids first..last as removed (individually up to a limit, then as one range)."""
        upto = min(last, first + RANGE_DETAIL_LIMIT - 1)
        for event_id in range(first, upto + 1):
            self.note(Finding(EVENT_REMOVED, event_id, detail))
        if upto < last:
            self.note(Finding(EVENT_REMOVED, upto + 1, f"{detail} (events {upto + 1}..{last})"))

    def feed(
        self,
        event_id: int,
        event: EventRow | None,
        seal: SealRow | None,
        predecessor: ChainLink | None,
        rows: Sequence[RowImage] = (),
    ) -> None:
        """`rows`: the state rows stored as covered by the seal, in position order."""
        adopted = seal is not None and seal.sealed_at_adoption
        self._advance(event_id, adopted)
        if event is None:
            if seal is not None:
                self.note(
                    Finding(
                        EVENT_REMOVED,
                        event_id,
                        "the event row is gone; its seal is left",
                        chain=seal.chain if isinstance(seal.chain, str) else None,
                        chain_seq=seal.chain_seq if type(seal.chain_seq) is int else None,
                    )
                )
            return
        self._events += 1
        self._digest = roll_head(self._digest, event_id, None if seal is None else seal.seal)
        if seal is None:
            self._unsealed += 1
            self.note(
                Finding(UNSEALED_EVENT, event_id, "no seal: the row was written outside the ledger")
            )
        else:
            self._sealed += 1
            self._adopted += int(adopted)
            self._check_sealed(event, seal, predecessor, rows)
        if seal is not None and is_archive_event(event):
            problems = self._archive.close(event)
        elif seal is not None and is_restore_event(event):
            problems = [*self._archive.restored(event), *self._archive.unclaimed(event_id)]
        else:
            problems = self._archive.unclaimed(event_id)
        for problem in problems:
            self.note(Finding(ARCHIVE_MISMATCH, event_id, problem))
        self._check_head_at(event_id)

    def _advance(self, event_id: int, adopted: bool) -> None:
        if event_id <= self._last_id:
            raise LedgerError(
                "VERIFY_ORDER_INVALID", f"event {event_id} fed after event {self._last_id}"
            )
        if self._dense_ids and event_id != self._last_id + 1:
            if adopted or self._last_adopted:  # the older runtime's history may have had it
                self._tolerated_gaps += 1
            else:
                detail = "missing from the event id sequence"
                self._missing_ids(self._last_id + 1, event_id - 1, detail)
        head = self._head
        if head is not None and not self._head_seen and event_id > head.last_event_id:
            self._head_seen = True
            detail = "the head's last event is gone from the log"
            self.note(Finding(HEAD_MISMATCH, head.last_event_id, detail))
        self._last_id = event_id
        self._last_adopted = adopted

    def archived(self, event_id: int, chain: object, seal: object, archive_event_id: int) -> None:
        """An event an archive removed: listed with its chain and seal under the id of the
        TASKS_ARCHIVED event that removed it. Its id and seal still roll into the head."""
        self._advance(event_id, False)
        self._archived += 1
        self._digest = roll_head(self._digest, event_id, seal if isinstance(seal, str) else None)
        self._archive.listed(event_id, chain, seal, archive_event_id)
        self._check_head_at(event_id)

    def _check_head_at(self, event_id: int) -> None:
        head = self._head
        if head is None or self._head_seen or event_id != head.last_event_id:
            return
        self._head_seen = True
        if head.events != self._events + self._archived or head.digest != self._digest:
            verdict = "differ" if head.digest != self._digest else "agree"
            self.note(
                Finding(
                    HEAD_MISMATCH,
                    event_id,
                    f"at this event the head counted {head.events} events, the log has "
                    f"{self._events + self._archived}; the digests {verdict}",
                )
            )

    def _check_sealed(
        self,
        event: EventRow,
        seal: SealRow,
        predecessor: ChainLink | None,
        rows: Sequence[RowImage],
    ) -> None:
        event_id = event.event_id
        if not _seal_well_formed(seal, self._legacy):
            self.note(Finding(FORGED_EVENT, event_id, "the seal row is malformed"))
            return
        seq = seal.chain_seq
        other = None if seq == 1 or predecessor is None else predecessor.event_id
        link_ok = True
        if seq == 1:
            link_ok = seal.prev_seal == GENESIS_SEAL
        elif predecessor is None:
            detail = f"chain_seq {seq - 1} of the chain is missing before this event"
            self._report_link(CHAIN_GAP, event_id, seal, other, detail)
        elif predecessor.chain_seq != seq - 1:
            kind = CHAIN_GAP if predecessor.chain_seq < seq - 1 else EVENT_REORDERED
            detail = f"the chain's previous seal is at chain_seq {predecessor.chain_seq}"
            self._report_link(kind, event_id, seal, other, detail)
        else:
            link_ok = predecessor.seal == seal.prev_seal
            if predecessor.event_id > event_id:
                detail = f"its chain predecessor is the later event {predecessor.event_id}"
                self._report_link(EVENT_REORDERED, event_id, seal, other, detail)
        verifies = seal_matches(event, seal, rows, event_id, self._legacy)
        if not link_ok:
            detail = "its prev_seal is not the seal before it in its chain"
            if verifies and other is not None:
                detail += f": forged here, or event {other} was re-sealed"
            elif not verifies:
                detail += ", and it does not verify"
            self._report_link(FORGED_EVENT, event_id, seal, other, detail)
        elif not verifies:
            self._content_changed(event, seal, rows)

    def _report_link(
        self, code: str, event_id: int, seal: SealRow, other: int | None, detail: str
    ) -> None:
        self.note(
            Finding(
                code,
                event_id,
                detail,
                chain=seal.chain,
                chain_seq=seal.chain_seq,
                other_event_id=other,
            )
        )

    def _content_changed(self, event: EventRow, seal: SealRow, rows: Sequence[RowImage]) -> None:
        for other_event, other_seal, other_rows in self._mismatches:
            if _swapped((event, seal, rows), (other_event, other_seal, other_rows), self._legacy):
                self._retract(CONTENT_CHANGED, other_event.event_id)
                self._retract(EVENT_SWAPPED, other_event.event_id)
                for mine, theirs in ((other_event, event), (event, other_event)):
                    self.note(
                        Finding(
                            EVENT_SWAPPED,
                            mine.event_id,
                            f"changed places with event {theirs.event_id}",
                            other_event_id=theirs.event_id,
                        )
                    )
                return
        self._mismatches.append((event, seal, rows))
        detail = "payload, type, timestamp, agent, task or sealed rows changed since it was sealed"
        if _content_well_typed(event) and seal.chain != chain_of(event.task_id):
            detail = f"its task no longer belongs to chain {seal.chain}"
        self._report_link(CONTENT_CHANGED, event.event_id, seal, None, detail)

    def check_row(
        self,
        table: str,
        key: str,
        digest: str | None,
        sealed: tuple[int, str | None] | None,
        *,
        history: bool,
    ) -> None:
        """Hold a current state row (its `digest`, None when it has none) against `sealed`, the
        (event id, row digest) of the last seal that wrote it (a digest of None: the seal's row
        could not be told, which no row matches). `history`: the row may predate seals over
        rows (its chain, or the ledger, holds events sealed at adoption), so no seal proves
        nothing."""
        self._rows_checked += 1
        if sealed is None:
            if history:
                self._rows_unprovable += 1
                return
            detail = "no sealed event wrote this row: inserted behind the ledger's back"
            self.note(Finding(STATE_MISMATCH, None, detail, table=table, key=key))
            return
        event_id, sealed_digest = sealed
        if sealed_digest is None or digest != sealed_digest:
            detail = "the row differs from the row its last sealed event wrote"
            self.note(Finding(STATE_MISMATCH, event_id, detail, table=table, key=key))

    def last_task_seal(
        self, fold: ChainedRowFold | None, sealed: tuple[int, str | None] | None
    ) -> tuple[int, str | None] | None:
        """The last seal of a task row: `sealed` (its last image), or the `fold` of its
        chain when a later seal's changes wrote it (a fold that broke is reported here)."""
        if fold is None:
            return sealed
        if fold.problem is not None:
            event_id, detail = fold.problem
            self.note(Finding(STATE_MISMATCH, event_id, detail, table=TASKS, key=fold.key))
        folded = fold.sealed()
        if folded is None or (sealed is not None and sealed[0] > folded[0]):
            return sealed
        return folded

    def check_row_gone(self, table: str, key: str, event_id: int) -> None:
        """A row the seal of `event_id` says was written (its last writer) is not there."""
        self._rows_checked += 1
        detail = "the row its last sealed event wrote is gone: deleted behind the ledger's back"
        self.note(Finding(STATE_MISMATCH, event_id, detail, table=table, key=key))

    def head(self) -> LedgerHead:
        return LedgerHead(
            events=self._events + self._archived, last_event_id=self._last_id, digest=self._digest
        )

    def finish(self, *, id_counter: int | None = None) -> VerificationReport:
        """End of the stream; `id_counter` is the store's last handed-out event id, if kept."""
        head = self._head
        if head is not None and not self._head_seen:
            self._head_seen = True
            detail = "in the head, gone from the log: the newest events were removed"
            first = self._last_id + 1 if self._dense_ids else head.last_event_id
            self._missing_ids(first, head.last_event_id, detail)
            counter_from = head.last_event_id + 1
        else:
            counter_from = self._last_id + 1
        if (
            self._dense_ids
            and id_counter is not None
            and id_counter >= counter_from
            and not self._last_adopted
        ):
            self._missing_ids(
                counter_from, id_counter, "handed out by the id counter but gone from the log"
            )
        for archive_event_id, problem in self._archive.remaining():
            self.note(Finding(ARCHIVE_MISMATCH, archive_event_id, problem))
        return VerificationReport(
            intact=not self._counts,
            events=self._events,
            archived=self._archived,
            sealed=self._sealed,
            sealed_at_adoption=self._adopted,
            unsealed=self._unsealed,
            tolerated_adoption_gaps=self._tolerated_gaps,
            rows_checked=self._rows_checked,
            rows_unprovable=self._rows_unprovable,
            head=self.head(),
            head_checked=head,
            findings=tuple(sorted(self._findings, key=_finding_order)),
            finding_counts=dict(self._counts),
            findings_truncated=sum(self._counts.values()) > len(self._findings),
        )


def _finding_order(finding: Finding) -> tuple[int, str]:
    return (-1 if finding.event_id is None else finding.event_id, finding.code)


Sealed = tuple[EventRow, SealRow, Sequence[RowImage]]


def _swapped(first: Sealed, second: Sealed, legacy: LegacyCheck | None) -> bool:
    """Did two events trade content (each verifies at the other's id and seal) or seals?"""
    a, a_seal, a_rows = first
    b, b_seal, b_rows = second

    # Content traded: each verifies at the other's place; seals traded: each at its own.
    return any(
        seal_matches(a, b_seal, a_rows, a_at, legacy)
        and seal_matches(b, a_seal, b_rows, b_at, legacy)
        for a_at, b_at in ((b.event_id, a.event_id), (a.event_id, b.event_id))
    )


def head_of_rows(rows: Any) -> LedgerHead:
    """The head over `(event_id, seal or None)` pairs in id order, without verifying seals."""
    digest, count, last = EMPTY_HEAD_DIGEST, 0, 0
    for event_id, seal in rows:
        digest = roll_head(digest, event_id, seal)
        count += 1
        last = event_id
    return LedgerHead(events=count, last_event_id=last, digest=digest)
