"""Archiving finished tasks to a file, checking such a file against the ledger, restoring it.
An archive is written and its tasks deleted in one write transaction, so that the file holds
exactly what is deleted; its sealed TASKS_ARCHIVED event records the file's digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.log.archive import (
    ArchiveCandidate,
    ArchiveRequest,
    ArchiveState,
    decide_archive,
    select_archive,
)
from aios_ledger.core.log.archive_file import (
    ArchiveContents,
    FileSealedRow,
    RowSeal,
    archive_summary_of,
    archived_task,
    chain_ends,
    file_sealed_rows,
    ledger_row_findings,
    read_archive,
    task_summary,
    unanchored_chains,
)
from aios_ledger.core.log.archived import (
    ArchivedChainEnd,
    LedgerSealedRow,
    archive_summary,
    payload_of,
    recorded_ledger_rows,
)
from aios_ledger.core.log.export import (
    ArchivedBundles,
    archive_header,
    export_bundle_lines,
    export_trailer,
    verify_export_lines,
)
from aios_ledger.core.log.export import export_state_line as state_line
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.restore import (
    RestoreAnswer,
    RestoreRequest,
    RestoreState,
    decide_restore,
    rows_to_restore,
)
from aios_ledger.core.log.rows import TASK_PROPOSALS
from aios_ledger.core.log.seals import LEDGER_CHAIN
from aios_ledger.core.log.state import state_row_columns, stored_row_state
from aios_ledger.core.log.verification import ARCHIVE_MISMATCH, Finding, head_of_rows
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.run import Connection, fetch_all, fetch_one, fetch_record
from aios_ledger.shell.git.proposals import bundle_path
from aios_ledger.shell.log.export import open_input, verify_export, write_events, write_line
from aios_ledger.shell.log.verification import ProgressCounter, ProgressHook

# The statements reading an archived task's rows for its state lines, by state table.
TASK_STATE_STATEMENTS = {
    name: f"archive_rows_{name}" for name, table in SEALED_TABLES.items() if table.of_task
}


def archive_tasks(
    db: Database,
    *,
    finished_before: object,
    output: str | os.PathLike[str],
    dry_run: bool = False,
    clock: Clock = system_clock,
    progress: ProgressHook | None = None,
) -> dict[str, Any]:
    """Archive the finished tasks last written before `finished_before` to new file `output`, or
    with `dry_run` only say which would be; nothing to archive writes nothing."""
    request = ArchiveRequest.parse(finished_before)
    target = _new_output(output)
    if dry_run:
        return db.read(lambda conn: _preview(conn, request))
    now = read_clock(clock)
    created: list[Path] = []
    bundles: list[str] = []

    actor = current_actor()

    def work(conn: Connection) -> dict[str, Any]:
        candidates = _with_ledger_rows(conn, _candidates(conn), request)
        chosen = select_archive(candidates, request)
        if not chosen:
            return _answer(request, chosen)
        partial = target.with_name(target.name + ".partial")
        with _created(created, partial, "x") as out:
            bundles.extend(_write_archive(db, out, request, chosen, progress))
        digest = file_digest(partial)
        executor = PlanExecutor(conn)
        state = ArchiveState(candidates, executor.tail(LEDGER_CHAIN))
        answer = executor.apply(
            decide_archive(state, request, now=now, archive_digest=digest, actor=actor)
        )
        _link_new(partial, target, created)
        return {**answer, "output": str(target), "dry_run": False}

    try:
        answer = db.write(work)
        _remove_unproposed(db, bundles)
        return answer
    except BaseException:
        for path in created:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    finally:
        if len(created) == 2:  # the partial file, once linked to the output
            with contextlib.suppress(OSError):
                created[0].unlink()


def _new_output(output: str | os.PathLike[str]) -> Path:
    try:
        target = Path(output)
        exists = os.path.lexists(target)
    except (TypeError, ValueError):
        raise LedgerError(
            "OUTPUT_UNWRITABLE", f"{str(output)[:200]!r} is not a usable path"
        ) from None
    if exists or not target.name:
        raise LedgerError(
            "OUTPUT_EXISTS", f"{str(target)[:200]!r} exists: an archive never replaces a file"
        )
    if not target.parent.is_dir():
        raise LedgerError("OUTPUT_UNWRITABLE", f"{str(target.parent)[:200]!r} is no directory")
    return target


@contextlib.contextmanager
def _created(created: list[Path], path: Path, mode: str) -> Any:
    try:
        handle = open(path, mode, encoding="ascii", newline="\n")  # noqa: SIM115
    except OSError as exc:
        raise LedgerError("OUTPUT_UNWRITABLE", f"{str(path)[:200]!r}: {exc.strerror}") from None
    created.append(path)
    with handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def _link_new(partial: Path, target: Path, created: list[Path]) -> None:
    """The archive under its name, without ever replacing a file that appeared meanwhile."""
    try:
        os.link(partial, target)
    except OSError as exc:
        code = "OUTPUT_EXISTS" if isinstance(exc, FileExistsError) else "OUTPUT_UNWRITABLE"
        raise LedgerError(code, f"{str(target)[:200]!r}: {exc.strerror}") from None
    created.append(target)


def _candidates(conn: Connection) -> tuple[ArchiveCandidate, ...]:
    # The statement selects every field but the ledger rows, by name.
    return tuple(ArchiveCandidate(**row) for row in fetch_all(conn, "archive_candidates"))


def _with_ledger_rows(
    conn: Connection, candidates: tuple[ArchiveCandidate, ...], request: ArchiveRequest
) -> tuple[ArchiveCandidate, ...]:
    """The candidates, the chosen ones with their ledger-sealed rows."""
    chosen = {candidate.task_id for candidate in select_archive(candidates, request)}
    return tuple(
        attrs.evolve(
            candidate,
            ledger_rows=tuple(
                LedgerSealedRow(str(row["row_table"]), str(row["row_key"]), int(row["event_id"]))
                for row in fetch_all(
                    conn, "archive_task_ledger_rows", {"task_id": candidate.task_id}
                )
            ),
        )
        if candidate.task_id in chosen
        else candidate
        for candidate in candidates
    )


def _answer(request: ArchiveRequest, chosen: tuple[ArchiveCandidate, ...]) -> dict[str, Any]:
    return {
        "archived": len(chosen),
        "events": sum(candidate.events for candidate in chosen),
        "finished_before": request.finished_before.text,
        "task_ids": [candidate.task_id for candidate in chosen],
        "output": None,
        "dry_run": False,
    }


def _preview(conn: Connection, request: ArchiveRequest) -> dict[str, Any]:
    chosen = select_archive(_candidates(conn), request)
    return {**_answer(request, chosen), "dry_run": True}


def _write_archive(
    db: Database,
    out: IO[str],
    request: ArchiveRequest,
    chosen: tuple[ArchiveCandidate, ...],
    progress: ProgressHook | None,
) -> list[str]:
    """Write the chosen tasks' events, state lines, bundles and trailer; the bundles written."""
    selected = {candidate.task_id for candidate in chosen}
    counter = ProgressCounter(progress, sum(candidate.events for candidate in chosen))
    write_line(out, archive_header(request.finished_before.text))

    def lines() -> Iterator[tuple[int, str | None]]:
        with (
            db.cursor_rows("archive_candidate_events") as rows,
            db.cursor_rows("archive_candidate_sealed_rows") as sealed_rows,
        ):
            yield from write_events(out, rows, sealed_rows, counter, tasks=selected)

    head = head_of_rows(lines())
    bundles: list[str] = []
    for candidate in chosen:
        for table, statement in TASK_STATE_STATEMENTS.items():
            with db.cursor_rows(statement, {"task_id": candidate.task_id}) as rows:
                for row in rows:
                    key, digest = stored_row_state(
                        SEALED_TABLES[table], row, row["sealed_row_digest"]
                    )
                    held = state_row_columns(SEALED_TABLES[table], row)
                    write_line(out, state_line(table, key, digest, held))
                    if table == TASK_PROPOSALS and row["bundle_sha256"] not in bundles:
                        bundles.append(str(row["bundle_sha256"]))
    for bundle in bundles:
        for line in export_bundle_lines(bundle, _bundle_bytes(db, bundle)):
            write_line(out, line)
    write_line(out, export_trailer(head))
    counter.close()
    return bundles


def _bundle_bytes(db: Database, bundle: str) -> bytes:
    """A proposal's stored bundle file; one gone or changed is refused, as the archive would not
    prove it."""
    try:
        data = bundle_path(db, bundle).read_bytes()
    except OSError:
        raise LedgerError(
            "BUNDLE_MISSING", f"the stored bundle {bundle} is missing: nothing was archived"
        ) from None
    if hashlib.sha256(data).hexdigest() != bundle:
        raise LedgerError(
            "BUNDLE_CHANGED", f"the stored bundle {bundle} was changed: nothing was archived"
        )
    return data


def _remove_unproposed(db: Database, bundles: list[str]) -> None:
    """After the archive committed: the bundle files no proposal left in the ledger names."""

    def still_proposed(conn: Connection) -> set[str]:
        return {
            bundle
            for bundle in bundles
            if fetch_all(conn, "bundle_still_proposed", {"bundle_sha256": bundle})[0]["proposals"]
        }

    kept = db.read(still_proposed)
    for bundle in bundles:
        if bundle not in kept:
            with contextlib.suppress(OSError):
                bundle_path(db, bundle).unlink()


def _put_back_bundles(db: Database, bundles: ArchivedBundles) -> None:
    """Before a restore: put back each missing archived bundle, never over a file."""
    for bundle in bundles.complete:
        target = bundle_path(db, bundle)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".restoring")
        try:
            partial.write_bytes(bundles.data(bundle))
            with contextlib.suppress(FileExistsError):
                os.link(partial, target)
        except OSError as exc:
            raise LedgerError(
                "OUTPUT_UNWRITABLE", f"{str(target)[:200]!r}: {exc.strerror}"
            ) from None
        finally:
            with contextlib.suppress(OSError):
                partial.unlink()


def file_digest(path: str | os.PathLike[str]) -> str:
    """`sha256:` and the hex sha256 of the file's bytes, as TASKS_ARCHIVED records it."""
    with open_input(path) as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


def verify_archive(db: Database, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check an archive file offline and against the ledger: a sealed TASKS_ARCHIVED event must
    record its digest and each chain's last seal, so the seals are the ledger's, not the file's."""
    report = verify_export(path)
    digest = file_digest(path)
    recorded = db.read(lambda conn: fetch_all(conn, "archive_events_recorded"))
    chains_by_event: dict[int, dict[str, ArchivedChainEnd]] = {}
    archive_event_id = None
    recorded_rows: dict[str, frozenset[LedgerSealedRow]] | None = None
    for row in recorded:
        payload = payload_of(row["payload_json"])
        summary = archive_summary(payload)
        if summary is None:
            continue
        chains_by_event[row["event_id"]] = summary["chains"]
        if summary["archive_sha256"] == digest:
            archive_event_id, recorded_rows = row["event_id"], recorded_ledger_rows(payload)
    findings: list[Finding] = []
    if archive_event_id is None:
        detail = (
            f"no TASKS_ARCHIVED event recorded the digest {digest}: the file was changed since "
            "it was archived, or is not an archive of this ledger"
        )
        findings.append(Finding(ARCHIVE_MISMATCH, None, detail))
    anchors = (
        list(chains_by_event.values())
        if archive_event_id is None
        else [chains_by_event[archive_event_id]]
    )
    contents = _contents(path)
    if contents is not None:
        findings.extend(
            Finding(ARCHIVE_MISMATCH, None, detail, chain=chain)
            for chain, detail in unanchored_chains(chain_ends(contents), anchors)
        )
        seals = db.read(lambda conn: _row_seals(conn, contents))
        findings.extend(ledger_row_findings(contents, seals, recorded_rows))
    if findings:
        counts = dict(report.finding_counts)
        counts[ARCHIVE_MISMATCH] = counts.get(ARCHIVE_MISMATCH, 0) + len(findings)
        report = attrs.evolve(
            report, intact=False, findings=(*findings, *report.findings), finding_counts=counts
        )
    return {**report.public(), "archive_sha256": digest, "archive_event_id": archive_event_id}


def _contents(path: str | os.PathLike[str]) -> ArchiveContents | None:
    """The file's tasks; None for a file that is no archive (the offline check says so)."""
    try:
        with open_input(path) as handle:
            return read_archive(handle)
    except LedgerError:
        return None


def _row_seals(
    conn: Connection, contents: ArchiveContents
) -> list[tuple[FileSealedRow, RowSeal | None]]:
    """Each of the file's ledger-sealed rows, with the ledger's last seal of it (None: none)."""
    seals: list[tuple[FileSealedRow, RowSeal | None]] = []
    for row in file_sealed_rows(contents, SEALED_TABLES):
        found = fetch_one(
            conn, "archive_ledger_row_seal", {"row_table": row.table, "row_key": row.key}
        )
        seal = None if found is None else RowSeal(int(found["event_id"]), str(found["row_digest"]))
        seals.append((row, seal))
    return seals


def show_archive(path: str | os.PathLike[str], task_id: str | None = None) -> dict[str, Any]:
    """An archive file read back, every task or the one named; it proves nothing."""
    with open_input(path) as handle:
        contents = read_archive(handle)
    summary = archive_summary_of(contents)
    if task_id is not None:
        summary["tasks"] = [task_summary(archived_task(contents, task_id))]
    return {"file": os.fspath(path), **summary}


def restore_archive(
    db: Database,
    path: str | os.PathLike[str],
    *,
    idempotency_key: str | None = None,
    clock: Clock = system_clock,
) -> dict[str, Any]:
    """Put an archive's tasks back, with their original ids and seals, behind one sealed
    TASKS_RESTORED event; a file failing the offline check is refused."""
    with open_input(path) as handle:
        data = handle.read()
    # One read of the file: what is checked, hashed and restored are the same bytes.
    bundles = ArchivedBundles(keep=True)
    report = verify_export_lines(data.splitlines(keepends=True), SEALED_TABLES, bundles)
    if not report.intact:
        codes = ", ".join(sorted(report.finding_counts))
        raise LedgerError(
            "ARCHIVE_NOT_INTACT",
            f"{os.fspath(path)[:200]!r} fails the offline check ({codes}): "
            "`aios-ledger verify-archive` says where; nothing was restored",
        )
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    request = RestoreRequest.from_mapping(
        {"archive_sha256": digest, "idempotency_key": idempotency_key}
    )
    contents = read_archive(data.splitlines(keepends=True))
    now = read_clock(clock)
    # The files first: a restore refused after them leaves files no proposal names, harmless.
    _put_back_bundles(db, bundles)

    actor = current_actor()

    def work(conn: Connection) -> dict[str, Any]:
        executor = PlanExecutor(conn)
        state = _restore_state(conn, executor, request, contents)
        answer: RestoreAnswer = executor.apply(
            decide_restore(state, request, contents, tables=SEALED_TABLES, now=now, actor=actor)
        )
        return dict(answer)

    return db.write(work)


def _restore_state(
    conn: Connection, executor: PlanExecutor, request: RestoreRequest, contents: ArchiveContents
) -> RestoreState:
    """What decide_restore decides on, read under the write lock. The archive event is the last
    that recorded the digest: archiving the same tasks again can give the same file twice."""
    archive_event_id, recorded = None, {}
    for row in fetch_all(conn, "archive_events_recorded"):
        summary = archive_summary(payload_of(row["payload_json"]))
        if summary is not None and summary["archive_sha256"] == request.archive_sha256:
            archive_event_id, recorded = row["event_id"], summary["chains"]
    listed: dict[str, ArchivedChainEnd] = {}
    if archive_event_id is not None:
        params = {"archive_event_id": archive_event_id}
        for row in fetch_all(conn, "restore_archive_listings", params):
            listed[str(row["chain"])] = ArchivedChainEnd(row["event_id"], str(row["seal"]))
    taken = frozenset(
        (row.table, row.key, str(found["taken"]))
        for row in rows_to_restore(contents, SEALED_TABLES)
        for found in fetch_all(
            conn, "restore_row_taken", {"row_table": row.table, "row_key": row.key, "seq": row.seq}
        )
    )
    prior = None
    if request.idempotency_key is not None:
        prior = fetch_record(
            conn,
            "task_idempotency_get",
            {"idempotency_key": request.idempotency_key},
            IdempotencyRow,
        )
    return RestoreState(
        archive_event_id=archive_event_id,
        recorded=recorded,
        listed=listed,
        taken=taken,
        prior=prior,
        tail=executor.tail(LEDGER_CHAIN),
    )
