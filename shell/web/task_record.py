"""Everything the ledger holds of one task, read for its console page: events with their
inclusion proofs, attempts with their evidence, reviews and proposals, and governed writes.

It reads through the same functions the API and `aios-ledger why` read through, so the console
never computes a second answer of its own.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import markupsafe
from aios_ledger.core import EventRow, HistoryEntry, LedgerError
from aios_ledger.core.git import ProposalRow
from aios_ledger.core.jsonvalue import JsonValue, loads_document
from aios_ledger.core.tasks import named_attempt, task_history
from aios_ledger.core.tasks.answers import event_view
from aios_ledger.core.tasks.attempts import evidence_run
from aios_ledger.core.tasks.refusals import RefusalEntry, refusal_entries
from aios_ledger.shell.api.backend import Stores
from aios_ledger.shell.attest.commits import attestation_row
from aios_ledger.shell.attest.facts import (
    attempt_events,
    attempt_reviews,
    sealed_event,
    verdict_reviewer,
)
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import prove_inclusion, tree_head_at
from aios_ledger.shell.db.run import Connection, Row, fetch_all, fetch_one
from aios_ledger.shell.git.proposals import (
    SCRATCH_REFS,
    fetch_bundle,
    read_stored_bundle,
    scratch_quarantine,
    verify_bundle,
)
from aios_ledger.shell.git.repos import repository_row
from aios_ledger.shell.git.runner import run_git

# What a task's page shows at most, so that it stays under 100 KB however long the task ran;
# the whole of each is a link away. Events (about 1.5 KB each with a proof), the latest first:
EVENTS_SHOWN = 25
RUN_EVENTS_SHOWN = 50
# A run event's text, in characters, and all of them in bytes of escaped HTML:
RUN_TEXT_SHOWN = 200
RUN_TEXT_LIMIT = 12 * 1024
# All the diffs, in bytes of HTML (git's output is read up to as many bytes):
DIFF_LIMIT = 32 * 1024
# The result and the execution envelope, each as indented JSON:
DOCUMENT_LIMIT = 8 * 1024
# What task.html adds to each line of a diff, at most: `<span class="hunk">`, `</span>`, `\n`.
DIFF_LINE_MARKUP = 27
DIFF_CUT = "cut to fit the page: the whole change is the proposal's bundle"
REFUSALS_SHOWN = 20
DIFF_ARGUMENTS = ("diff", "--no-color", "--no-ext-diff", "--no-textconv")
ATTESTATION_FIELDS = ("keyid", "provenance_sha256", "review_sha256", "created_at")
# The events of `console_task_marks` that name a branch move or its pull request; the others mark
# the attempts.
GOVERNED_WRITE_EVENTS = frozenset(
    {
        "GOVERNED_WRITE_INTENDED",
        "GOVERNED_WRITE_APPLIED",
        "GOVERNED_WRITE_NOT_APPLIED",
        "GOVERNED_WRITE_MOVED_BY_OTHER",
        "PULL_REQUEST_OPENED",
        "PULL_REQUEST_FAILED",
    }
)


@attrs.frozen
class Proposal:
    """One attempt's proposal; a diff that cannot be shown is None, `diff_note` saying why."""

    row: ProposalRow
    changed_files: list[Any]
    facts: Any
    diff: str | None
    diff_note: str | None


@attrs.frozen
class RunEvent:
    """One event of an evidence run as the page shows it: `cut` if `text` is not all of it."""

    seq: int
    kind: str
    created_at: str
    text: str
    cut: bool


@attrs.frozen
class Verdict:
    """The verdict on an attempt's result, from its TASK_VERIFIED event."""

    decision: str | None
    reviewer: str | None
    automatic: bool
    reason: str | None
    verified_at: str


@attrs.frozen
class Attempt:
    """One attempt of the task; `run_events` are the last of its evidence run's events."""

    number: int
    run: dict[str, Any] | None
    run_events: list[RunEvent]
    run_event_count: int
    reviews: list[dict[str, Any]]
    holder: str | None = None
    claimed_at: str | None = None
    submitted_at: str | None = None
    verdict: Verdict | None = None
    proposals: list[Proposal] = attrs.Factory(list)


@attrs.frozen
class TaskRecord:
    """The task's record: the shown window of its events, as `EventWindow`; `latest`: whether
    the window ends at the last event, where live updates start."""

    task: Any
    history: list[Any]
    events: list[dict[str, Any]]
    event_count: int
    earlier: int | None
    latest: bool
    last_event_id: int
    proofs: dict[int, dict[str, Any] | None]
    tree_head: dict[str, Any]
    attempts: list[Attempt]
    proposals: list[Proposal]
    writes: list[dict[str, Any]]
    attestations: dict[str, dict[str, Any]]
    refusals: list[RefusalEntry] = attrs.field(factory=list)


@attrs.frozen
class EventWindow:
    """The shown window of a task's events and their history, of `count` in all; `earlier`:
    the `before` of the older window (None: none older)."""

    events: list[dict[str, Any]]
    history: list[HistoryEntry]
    earlier: int | None
    count: int
    last_event_id: int


def read_event_window(
    conn: Connection, task_id: str, before: int | None, size: int = EVENTS_SHOWN
) -> EventWindow:
    """The last `size` of the task's events below `before` (None: of all), a keyset read of one
    more, which says whether an older window exists."""
    summary = fetch_one(conn, "console_task_event_count", {"task_id": task_id})
    count = 0 if summary is None else int(summary["event_count"])
    last_event_id = 0 if summary is None else int(summary["last_event_id"])
    below = last_event_id + 1 if before is None else before
    read = {"task_id": task_id, "before": below, "limit": size + 1}
    rows = fetch_all(conn, "console_task_events_before", read)[::-1]
    shown, older = rows[-size:], rows[:-size]
    attempt = _attempt_before(conn, task_id, older, size)
    return EventWindow(
        [sealed_event(row) for row in shown],
        task_history([event_view(EventRow.from_row(row)) for row in shown], attempt),
        int(shown[0]["event_id"]) if older else None,
        count,
        last_event_id,
    )


def _attempt_before(conn: Connection, task_id: str, older: list[Row], size: int) -> int:
    """The attempt in effect before a window (0: none), read back from `older` a window at a
    time; a claim and each heartbeat name theirs, so it is among the first few."""
    while older:
        for row in reversed(older):
            named = named_attempt(event_view(EventRow.from_row(row)))
            if named is not None:
                return named
        read = {"task_id": task_id, "before": int(older[0]["event_id"]), "limit": size}
        older = fetch_all(conn, "console_task_events_before", read)[::-1]
    return 0


def _governed_writes(marks: list[Row]) -> list[dict[str, Any]]:
    writes = []
    for row in marks:
        if row["event_type"] not in GOVERNED_WRITE_EVENTS:
            continue
        payload = loads_document(str(row["payload_json"]), what="payload_json")
        if isinstance(payload, dict):
            writes.append({"event_id": row["event_id"], "type": row["event_type"], **payload})
    return writes


def read_refusals(conn: Connection, task_id: str) -> list[RefusalEntry]:
    """The latest of the task's refused attempts, in order."""
    read = {"task_id": task_id, "limit": REFUSALS_SHOWN}
    rows = fetch_all(conn, "console_task_refusals", read)[::-1]
    return refusal_entries(sealed_event(row) for row in rows)


def read_task_record(stores: Stores, task_id: str, before: int | None = None) -> TaskRecord:
    """The task's record, its events shown up to `before` (None: the latest)."""
    task = stores.tasks.get(task_id)
    db = stores.db
    window, marked, refusals = db.read(
        lambda conn: (
            read_event_window(conn, task_id, before),
            fetch_all(conn, "console_task_marks", {"task_id": task_id}),
            read_refusals(conn, task_id),
        )
    )
    writes = _governed_writes(marked)
    # The task's claims, submissions and verdicts, in order: never its heartbeats.
    marks = [sealed_event(row) for row in marked if row["event_type"] not in GOVERNED_WRITE_EVENTS]
    head = tree_head_at(db)
    shown = sorted(int(event["event_id"]) for event in window.events)
    proofs = {event_id: _proof(db, event_id, head.size) for event_id in shown}
    proposals = _proposals(db, task_id)
    attempts = fit_run_texts(
        [
            _attempt(stores, task_id, number, marks, proposals)
            for number in range(1, task["attempt"] + 1)
        ]
    )
    keys = {str(w["idempotency_key"]) for w in writes if w["type"] == "GOVERNED_WRITE_APPLIED"}
    attestations = db.read(lambda conn: _attestations(conn, keys))
    return TaskRecord(
        task,
        window.history,
        window.events,
        window.count,
        window.earlier,
        before is None or before > window.last_event_id,
        window.last_event_id,
        proofs,
        head.public(),
        attempts,
        proposals,
        writes,
        attestations,
        refusals=refusals,
    )


def _proof(db: Database, event_id: int, size: int) -> dict[str, Any] | None:
    """The event's inclusion proof; None for a row adopted from before the log was a tree, and
    for one not integrated into the tree of `size` yet (PostgreSQL's integration lag)."""
    try:
        return prove_inclusion(db, event_id, size).public()
    except LedgerError as refused:
        if refused.code not in ("EVENT_NOT_FOUND", "EVENT_NOT_INTEGRATED", "TREE_SIZE_INVALID"):
            raise
        return None


def _attempt(
    stores: Stores,
    task_id: str,
    number: int,
    marks: list[dict[str, Any]],
    proposals: list[Proposal],
) -> Attempt:
    """Attempt `number`, its facts read from `marks` as `aios-ledger why` reads them."""
    claim, submitted, verified = attempt_events(marks, number)
    reviews = stores.db.read(lambda conn: attempt_reviews(conn, task_id, number))
    found = Attempt(
        number,
        None,
        [],
        0,
        reviews,
        holder=None if claim is None else claim["agent_id"],
        claimed_at=None if claim is None else claim["created_at"],
        submitted_at=None if submitted is None else submitted["created_at"],
        verdict=None if verified is None else _verdict(verified),
        proposals=[proposal for proposal in proposals if proposal.row.attempt == number],
    )
    run_id = evidence_run(task_id, number)
    try:
        run = stores.runs.get_run(run_id)
        shown = stores.runs.last_run_events(run_id, limit=RUN_EVENTS_SHOWN)
    except LedgerError as refused:
        if refused.code != "RUN_NOT_FOUND":
            raise
        return found
    events = [
        RunEvent(event.seq, event.kind, event.created_at, run_event_text(event.payload()), False)
        for event in shown
    ]
    return attrs.evolve(found, run=run.public(), run_events=events, run_event_count=run.event_count)


def _verdict(verified: dict[str, Any]) -> Verdict:
    payload = verified["payload"] if isinstance(verified["payload"], dict) else {}
    decision, reason = payload.get("decision"), payload.get("reason")
    return Verdict(
        decision if isinstance(decision, str) else None,
        verdict_reviewer(verified),
        payload.get("automatic") is True,
        reason if isinstance(reason, str) else None,
        str(verified["created_at"]),
    )


def run_event_text(payload: JsonValue) -> str:
    """A run event's text: a string payload as it is, any other JSON value as JSON."""
    if isinstance(payload, str):
        return payload
    if payload is None:
        return ""
    return json.dumps(payload, ensure_ascii=False, separators=(", ", ": "))


def fit_run_texts(attempts: list[Attempt]) -> list[Attempt]:
    """The run events' texts cut to fit the page, the latest attempt's last events first."""
    budget = RUN_TEXT_LIMIT
    fitted = []
    for attempt in reversed(attempts):
        events = []
        for event in reversed(attempt.run_events):
            shown = _fitting_start(event.text[:RUN_TEXT_SHOWN], budget)
            budget -= _html_bytes(shown)
            events.append(attrs.evolve(event, text=shown, cut=len(shown) < len(event.text)))
        fitted.append(attrs.evolve(attempt, run_events=events[::-1]))
    return fitted[::-1]


def _proposal_rows(conn: Connection, task_id: str) -> list[tuple[ProposalRow, str | None]]:
    """The task's proposals, each with its repository's path (None: no longer registered)."""
    found = []
    for row in fetch_all(conn, "task_proposals_of_task", {"task_id": task_id}):
        proposal = ProposalRow.from_row(row)
        repository = repository_row(conn, proposal.repository)
        found.append((proposal, None if repository is None else repository.path))
    return found


def _proposals(db: Database, task_id: str) -> list[Proposal]:
    """The proposals and their diffs, git run after the read so that no transaction waits on it."""
    found = []
    for proposal, repository_path in db.read(lambda conn: _proposal_rows(conn, task_id)):
        diff: str | None = None
        note: str | None = "the repository is no longer registered"
        if repository_path is not None:
            diff, note = _diff(db, repository_path, proposal)
        changed = loads_document(proposal.changed_files_json, what="changed_files_json")
        found.append(
            Proposal(
                proposal,
                changed if isinstance(changed, list) else [],
                loads_document(proposal.facts_json, what="facts_json"),
                diff,
                note,
            )
        )
    return fit_diffs(found)


def fit_lines(
    text: str, budget: int, line_markup: int, *, cut_in_line: bool = False
) -> tuple[str | None, int]:
    """The text's first lines whose escaped HTML fits `budget` (None: all of them) and the
    bytes they take; `cut_in_line`: the rest of the budget takes the next line's start."""
    lines = text.splitlines()
    used = 0
    for count, line in enumerate(lines):
        cost = _html_bytes(line) + line_markup
        if used + cost > budget:
            shown = lines[:count]
            if cut_in_line:
                start = _fitting_start(line, budget - used - line_markup)
                if start:
                    shown.append(start)
                    used += _html_bytes(start) + line_markup
            return "\n".join(shown), used
        used += cost
    return None, used


def _html_bytes(text: str) -> int:
    return len(str(markupsafe.escape(text)).encode())


def _fitting_start(line: str, budget: int) -> str:
    """The longest start of `line` whose HTML takes at most `budget` bytes."""
    used = 0
    for end, character in enumerate(line):
        used += _html_bytes(character)
        if used > budget:
            return line[:end]
    return line


def fit_diffs(proposals: list[Proposal]) -> list[Proposal]:
    """The proposals' diffs cut to DIFF_LIMIT in all, the newest (the last) first."""
    budget = DIFF_LIMIT
    fitted = []
    for proposal in reversed(proposals):
        diff = proposal.diff
        cut, used = (None, 0) if diff is None else fit_lines(diff, budget, DIFF_LINE_MARKUP)
        budget -= used
        if cut is None:
            fitted.append(proposal)
        else:
            fitted.append(attrs.evolve(proposal, diff=cut or None, diff_note=DIFF_CUT))
    return fitted[::-1]


def _diff(
    db: Database, repository_path: str, proposal: ProposalRow
) -> tuple[str | None, str | None]:
    """`git diff BASE HEAD` of the proposal's checked bundle, fetched into a scratch quarantine
    so the governed repository is never written; or why it cannot be shown."""
    try:
        bundle = read_stored_bundle(db, proposal.bundle_sha256)
        with scratch_quarantine(repository_path) as git_dir:
            verify_bundle(git_dir, bundle)
            fetch_bundle(git_dir, bundle, SCRATCH_REFS, only_head=True)
            compared = (proposal.base_oid, proposal.head_oid)
            result = run_git(
                ["--git-dir", git_dir, *DIFF_ARGUMENTS, *compared],
                max_output=DIFF_LIMIT,
                check=False,
                cut=True,
            )
    except LedgerError as refused:
        return None, f"{refused.code}: {refused.detail}"
    if result.returncode != 0:
        return None, "git could not compare the proposal with its base"
    data = result.stdout
    if len(data) > DIFF_LIMIT:
        return data[:DIFF_LIMIT].decode("utf-8", "replace"), DIFF_CUT
    return result.text, None


def _attestations(conn: Connection, keys: set[str]) -> dict[str, dict[str, Any]]:
    """The attestation of each applied write (by its idempotency key) that has one."""
    found = {}
    for key in sorted(keys):
        row = attestation_row(conn, key)
        if row is not None:
            found[key] = {name: getattr(row, name) for name in ATTESTATION_FIELDS}
    return found


def shown_document(document: Any) -> tuple[str, bool]:
    """A JSON document indented and cut to DOCUMENT_LIMIT, and whether it was cut."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    cut, _ = fit_lines(text, DOCUMENT_LIMIT, 1, cut_in_line=True)
    return (text, False) if cut is None else (cut, True)
