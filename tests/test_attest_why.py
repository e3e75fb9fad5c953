"""`why COMMIT` for a person: on a terminal, a short summary of the why document (task, agent,
reviewer, verdict, write, attestation, proofs) built by one pure function with a golden
snapshot, which checks what the document alone can show (the note against its sealed event,
each inclusion proof against the tree head); for a program or with `--json`, the whole
document as before."""

from __future__ import annotations

import copy
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.attest.why import why_summary
from aios_ledger.shell.cli import main
from aios_ledger.shell.console import render, why_view
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from conftest import ENGINES
from syrupy.assertion import SnapshotAssertion
from test_attest_commits import Landed

# A real `why_commit` answer (a write landed by agent-7, reviewed by alice, attested, with a
# signed checkpoint over its events), kept as it was answered.
DOCUMENT = json.loads((Path(__file__).parent / "fixtures" / "why_document.json").read_text())
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


def _holds_base64(text: str) -> bool:
    """A long base64 run (an envelope's payload or signature), not a hex object id."""
    return any(not re.fullmatch("[0-9a-f]+", run) for run in BASE64_RUN.findall(text))


def _lines(document: dict[str, Any]) -> dict[str, str]:
    [write] = why_summary(document).writes
    return dict(write)


def test_the_summary_of_a_why_document_is_golden(golden: SnapshotAssertion) -> None:
    summary = why_summary(DOCUMENT)
    assert summary.public() == golden
    lines = _lines(DOCUMENT)
    assert lines["agent"].startswith("agent-7 ") and lines["reviewer"] == "alice"
    assert lines["verdict"].startswith("SUCCEEDED at ")
    assert "the note matches its sealed COMMIT_ATTESTED event" in lines["attestation"]
    assert lines["inclusion"].startswith("9 of 9 events proven included")
    assert lines["checkpoint"].endswith("the proofs are against its root")


def test_the_summary_says_what_does_not_check_out() -> None:
    tampered = copy.deepcopy(DOCUMENT)
    write = tampered["writes"][0]
    write["attestation"]["note"]["review"]["payload"] = "eyJ4IjoxfQ=="
    write["inclusion_proofs"][2]["hashes"][0] = "00" * 32
    del write["inclusion_proofs"][-1]
    tampered["tree_head"] = {**tampered["tree_head"], "root": "11" * 32}
    lines = _lines(tampered)
    assert "NOT VERIFIED: the note differs" in lines["attestation"]
    assert "0 of 9 events proven" in lines["inclusion"]
    assert "1 event(s) without a proof" in lines["inclusion"]
    assert lines["checkpoint"].endswith("NOT the root of the proofs")


def test_an_unattested_write_without_a_checkpoint_says_so() -> None:
    bare = copy.deepcopy(DOCUMENT)
    bare["writes"][0]["attestation"] = None
    bare["checkpoint"] = None
    bare["writes"][0]["verdict"]["reviewer"] = None
    lines = _lines(bare)
    assert lines["attestation"] == "none: the write landed unattested"
    assert "signature" not in lines  # nothing to check
    assert lines["checkpoint"].startswith("none signed covers these events yet")
    assert lines["reviewer"] == "not named in the verdict"


@pytest.mark.parametrize("width", [50, 80, 160])
def test_the_terminal_view_is_short_and_holds_no_envelope(width: int) -> None:
    drawn = render(why_view(DOCUMENT), width=width)
    assert len(drawn.splitlines()) < 40 and not _holds_base64(drawn), drawn
    assert max(len(line) for line in drawn.splitlines()) <= width
    assert DOCUMENT["commit"] in drawn


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def landed(
    tmp_path: Path, ledger_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Landed]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    yield Landed(tmp_path, ledger_target)


@pytest.mark.parametrize("engine", ENGINES)
def test_why_on_a_terminal_is_a_summary_and_json_the_whole_document(
    landed: Landed, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = landed.land("task-w", key=landed.key, reviewer="alice")["new_oid"]

    def why(*extra: str, out: io.StringIO) -> str:
        monkeypatch.setattr("sys.stdout", out)
        assert main(["--db", str(landed.db), "why", commit, *extra]) == 0
        return out.getvalue()

    shown = re.sub(r"\x1b\[[0-9;]*m", "", why(out=_Terminal()))  # without its colours
    assert len(shown.splitlines()) < 40 and not _holds_base64(shown), shown
    words = " ".join(shown.split())
    for expected in ("task-w, attempt 1", "agent-7", "alice", "SUCCEEDED", "matches its sealed"):
        assert expected in words, shown
    whole = json.loads(why("--json", out=_Terminal()))
    assert whole["writes"][0]["attestation"]["note"]["provenance"]["payload"]
    assert whole["writes"][0]["inclusion_proofs"]
    assert json.loads(why(out=io.StringIO())) == whole  # a pipe gets the document too


def test_the_summary_names_who_gave_the_verdict_and_who_asked_for_the_write() -> None:
    """The actors of the task's TASK_VERIFIED and of the write's first event, as a person reads
    them; a document of a ledger written before events named actors has neither line."""
    document = copy.deepcopy(DOCUMENT)
    (write,) = document["writes"]
    write["verdict"]["verified_by"] = {
        "name": "reviewer-1",
        "via": "http",
        "roles": ["reviewer"],
        "authenticated": True,
    }
    write["governed_write"]["written_by"] = None
    lines = _lines(document)
    assert lines["reviewer"].endswith("verdict given by reviewer-1 (reviewer, http)")
    assert lines["written by"] == "unknown"
    assert "written by" not in _lines(DOCUMENT)
