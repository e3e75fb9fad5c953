"""A second implementation of docs/conformance.md, written from the page alone with nothing but
Python's standard library: the digests, an event's seal, the log's head, and a verifier of an
export (`check_export`). It imports nothing of aios_ledger, so that a rule the page leaves out or
states wrongly fails the tests that use it (tests/test_conformance_vectors.py over the committed
vectors, tests/test_conformance_export.py over real exports of both engines).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GENESIS_SEAL = "sha256:" + "0" * 64
EMPTY_HEAD = "sha256:" + hashlib.sha256(b"aios.ledger_head.v1").hexdigest()
EXPORT_SCHEMA = "aios.event_export.v1"
TIMESTAMP_COLUMNS = frozenset(
    {"created_at", "updated_at", "deadline", "lease_expires_at", "not_before"}
)
# The event row's columns a seal's document holds (besides actor, chain, chain_seq, prev_seal).
SEALED_EVENT_FIELDS = (
    "event_id",
    "task_id",
    "agent_id",
    "event_type",
    "payload_json",
    "created_at",
)
CHAINED_FIELDS = ("row_changes", "chained_row_digest")
# The key columns an archive's rows carry beside the columns their digest covers: two columns
# joined by a space, for the tables keyed by two.
JOINED_KEY_COLUMNS = {"governed_bindings": "binding_key", "run_events": "run_event_key"}
# The tables whose rows of a task seals of the ledger chain cover: an archive holds those rows
# without the seals.
LEDGER_SEALED_TABLES = frozenset({"auxiliary_runs", "governed_bindings", "run_events"})


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def domain_digest(domain: str, data: bytes) -> str:
    return "sha256:" + hashlib.sha256(domain.encode("utf-8") + b"\0" + data).hexdigest()


def domain_digest_json(domain: str, value: Any) -> str:
    return domain_digest(domain, canonical(value).encode("ascii"))


def digested_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The columns a state row's digest covers: every one, a timestamp's `.000Z` written `Z`."""
    digested = {}
    for name, value in columns.items():
        whole_second = isinstance(value, str) and value.endswith(".000Z")
        digested[name] = value[:-5] + "Z" if name in TIMESTAMP_COLUMNS and whole_second else value
    return digested


def row_digest(table: str, key: str, columns: Mapping[str, Any]) -> str:
    document = {"table": table, "key": key, "columns": digested_columns(columns)}
    return domain_digest_json("aios.state_row.v1", document)


def chained_row_digest(previous: str | None, task_id: str, changes: str) -> str:
    text = ",".join((canonical(previous), canonical("tasks"), canonical(task_id), changes))
    return domain_digest("aios.row_chain.v1", text.encode("ascii"))


def roll_head(head: str, event_id: int, seal: str | None) -> str:
    rolled = f"{head}\0{event_id}\0{'unsealed' if seal is None else seal}".encode("ascii")
    return domain_digest("aios.ledger_head.v1", rolled)


def chain_of(task_id: str | None) -> str:
    return "ledger" if task_id is None else "task:" + task_id


def event_seal(
    event: Mapping[str, Any],
    chain_seq: int,
    prev_seal: str,
    version: int,
    rows: Sequence[Mapping[str, Any]] | None,
    chained: tuple[str | None, str | None] = (None, None),
) -> str:
    """The seal of `event` (its row's columns, and `actor` when it names one) at `chain_seq` of
    its chain after `prev_seal`: v1 over no rows, v2-v5 over `rows` ({table, key, digest}), v3
    and v5 without the event id, v4 and v5 with `chained` (row_changes, chained_row_digest)."""
    document = {name: event[name] for name in SEALED_EVENT_FIELDS}
    if event.get("actor") is not None:
        document["actor"] = event["actor"]
    document.update(chain=chain_of(event["task_id"]), chain_seq=chain_seq, prev_seal=prev_seal)
    if version in (3, 5):
        del document["event_id"]
    if version >= 2:
        document["rows"] = [
            {name: row[name] for name in ("table", "key", "digest")} for row in rows or ()
        ]
    if version in (4, 5):
        document["row_changes"], document["chained_row_digest"] = chained
    return domain_digest_json(f"aios.event_seal.v{version}", document)


@dataclass
class ExportCheck:
    """What `check_export` found: each broken rule (`problems`, by line number), the head it
    rolled, and each chain's last seal (`tips`: chain -> (chain_seq, seal))."""

    problems: list[tuple[int, str]] = field(default_factory=list)
    events: int = 0
    last_event_id: int = 0
    head: str = EMPTY_HEAD
    tips: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The tables of the state lines held against their seals.
    state_tables: set[str] = field(default_factory=set)
    # The task rows whose last seal was folded from v4 or v5 changes.
    folded_rows: int = 0
    # An archive's bundle files whose bytes hash to their names.
    bundles: int = 0

    def lines_with_problems(self) -> set[int]:
        return {number for number, _ in self.problems}


@dataclass
class _Chain:
    seq: int = 0
    seal: str = GENESIS_SEAL
    chained: str | None = None


class _ExportChecker:
    def __init__(self, *, archive: bool) -> None:
        self.archive = archive
        self.bundles: dict[str, list[bytes]] = {}
        self.bundles_named: set[str] = set()
        self.bundles_whole: set[str] = set()
        self.found = ExportCheck()
        self.chains: dict[str, _Chain] = {}
        # The last seal of each state row: (event id, digest), a task row's fold apart.
        self.sealed: dict[tuple[str, str], tuple[int, str]] = {}
        self.folds: dict[str, tuple[int, dict[str, Any]]] = {}
        self.seen: set[tuple[str, str]] = set()
        # Rows of archived tasks that seals of the ledger chain cover, as archive events record.
        self.archived_rows: set[tuple[str, str, int]] = set()
        self.number = 0

    def problem(self, what: str) -> None:
        self.found.problems.append((self.number, what))

    def roll(self, event_id: int, seal: str | None) -> None:
        found = self.found
        if event_id <= found.last_event_id:
            self.problem(f"event {event_id} after event {found.last_event_id}: out of order")
        found.head = roll_head(found.head, event_id, seal)
        found.events += 1
        found.last_event_id = event_id

    def event(self, line: Mapping[str, Any]) -> None:
        event_id, version, seal = line["event_id"], line["seal_version"], line["seal"]
        self.roll(event_id, seal)
        if seal is None:
            self.problem("an unsealed event")
            return
        chain_name = chain_of(line["task_id"])
        chain = self.chains.setdefault(chain_name, _Chain())
        if line["chain"] != chain_name:
            self.problem(f"its chain is {line['chain']!r}, its task's is {chain_name!r}")
        if (line["chain_seq"], line["prev_seal"]) != (chain.seq + 1, chain.seal):
            self.problem("not the next link of its chain")
        rows = line["rows"]
        if version == 1 and rows:
            self.problem("a v1 seal covers no rows")
        chained: tuple[str | None, str | None] = (None, None)
        if version in (4, 5):
            # An export written before 1.0 left both out of a v4 line where both were null.
            chained = (line.get("row_changes"), line.get("chained_row_digest"))
            self.chained_row(line, chain, chained)
        else:
            if any(name in line for name in CHAINED_FIELDS):
                self.problem(f"a v{version} line with the chained row fields")
            chain.chained = None
        expected = event_seal(line, line["chain_seq"], line["prev_seal"], version, rows, chained)
        if expected != seal:
            self.problem(f"the seal is not the v{version} seal of the line")
        chain.seq, chain.seal = line["chain_seq"], seal
        self.found.tips[chain_name] = (chain.seq, chain.seal)
        for row in rows or ():
            self.sealed[(row["table"], row["key"])] = (event_id, row["digest"])
        if line["event_type"] == "TASKS_ARCHIVED" and line["task_id"] is None:
            payload = json.loads(line["payload_json"])
            for archived in payload["chains"]:
                for table, key, sealed_by in archived.get("ledger_rows", ()):
                    self.archived_rows.add((table, key, sealed_by))

    def chained_row(
        self, line: Mapping[str, Any], chain: _Chain, chained: tuple[str | None, str | None]
    ) -> None:
        changes, digest = chained
        task_id = line["task_id"]
        if changes is None and digest is None:
            chain.chained = None  # carried none on: the next write holds every column
            return
        if changes is None:
            if digest != chain.chained:
                self.problem("a seal that wrote no task row changed the chained row digest")
            return
        if task_id is None:
            self.problem("a ledger event's seal with task row changes")
            return
        if digest != chained_row_digest(chain.chained, task_id, changes):
            self.problem("the chained row digest does not follow from the previous and changes")
        columns = json.loads(changes)
        if chain.chained is not None and task_id in self.folds:
            columns = {**self.folds[task_id][1], **columns}
        self.folds[task_id] = (line["event_id"], columns)
        chain.chained = digest

    def archived(self, line: Mapping[str, Any]) -> None:
        self.roll(line["archived"], line["seal"])

    def state(self, line: Mapping[str, Any]) -> None:
        table, key, digest = line["state"], line["key"], line["digest"]
        self.found.state_tables.add(table)
        self.seen.add((table, key))
        if self.archive:
            row = dict(line["row"])
            row.pop(JOINED_KEY_COLUMNS.get(table, ""), None)
            if row_digest(table, key, row) != digest:
                self.problem(f"{table} {key}: the row does not give its line's digest")
            if table == "task_proposals":
                self.bundles_named.add(row["bundle_sha256"])
        last = self.last_sealed(table, key)
        if last is None and self.archive and table in LEDGER_SEALED_TABLES:
            return  # its seal is the ledger's, which `verify-archive` holds it against
        if last is None:
            self.problem(f"{table} {key}: no seal wrote this row")
        elif digest is None or digest != last[1]:
            self.problem(f"{table} {key}: not the row event {last[0]} sealed")

    def bundle(self, line: Mapping[str, Any]) -> None:
        parts = self.bundles.setdefault(line["bundle"], [])
        if line["part"] != len(parts):
            self.problem(f"bundle {line['bundle']}: part {line['part']} out of order")
        parts.append(base64.b64decode(line["data"]))
        if line["part"] + 1 < line["parts"]:
            return
        if hashlib.sha256(b"".join(parts)).hexdigest() != line["bundle"]:
            self.problem(f"bundle {line['bundle']}: its bytes hash to another sha256")
        self.bundles_whole.add(line["bundle"])
        self.found.bundles += 1

    def last_sealed(self, table: str, key: str) -> tuple[int, str] | None:
        image = self.sealed.get((table, key))
        fold = self.folds.get(key) if table == "tasks" else None
        if fold is not None and (image is None or image[0] < fold[0]):
            self.found.folded_rows += 1
            return fold[0], row_digest(table, key, fold[1])
        return image

    def rows_gone(self) -> None:
        written = set(self.sealed) | {("tasks", key) for key in self.folds}
        for table, key in sorted(written - self.seen):
            event_id = self.last_sealed(table, key)
            assert event_id is not None
            if (table, key, event_id[0]) not in self.archived_rows:
                self.problem(f"{table} {key}: sealed by event {event_id[0]}, gone")


def check_export(lines: Iterable[str]) -> ExportCheck:
    """Check an export (`aios-ledger export` of everything or of a task, or an `aios-ledger
    archive` file: JSON lines) by the page's rules: the header, each event's seal and its place
    in its chain, the chained task rows of v4 seals, the state lines against the last seal of
    each row (an archive's rows against their lines), an archive's bundles, the head and the
    trailer."""
    parsed = [json.loads(text) for text in lines]
    header, *body = parsed
    scope = header.get("scope")
    checker = _ExportChecker(archive=scope == "archive")
    if header.get("schema") != EXPORT_SCHEMA or scope not in ("all", "task", "archive"):
        checker.problem("not the header of an export")
    dense = scope == "all" and header.get("dense_ids", True)
    trailer = None
    for checker.number, line in enumerate(body, start=2):
        if trailer is not None:
            checker.problem("a line after the trailer")
        elif "end" in line:
            trailer = line
        elif "state" in line:
            checker.state(line)
        elif "bundle" in line:
            checker.bundle(line)
        elif "archived" in line:
            checker.archived(line)
        else:
            if dense and line["event_id"] != checker.found.last_event_id + 1:
                checker.problem(f"dense ids, yet event {line['event_id']} follows a gap")
            checker.event(line)
    if scope != "task":
        checker.rows_gone()
    for missing in sorted(checker.bundles_named - checker.bundles_whole):
        checker.problem(f"bundle {missing}: a proposal names it, the archive lacks it")
    found = checker.found
    rolled = {
        "end": EXPORT_SCHEMA,
        "events": found.events,
        "last_event_id": found.last_event_id,
        "digest": found.head,
    }
    if trailer != rolled:
        checker.number = len(parsed)
        checker.problem(f"the trailer {trailer} is not the head of the lines, {rolled}")
    return found
