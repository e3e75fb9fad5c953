"""Every command of the command line under hostile input: arbitrary and near-valid JSON, wrong
types, huge strings and numbers, deep nesting, invalid UTF-8 (in files and on stdin), lone
surrogates, SQL metacharacters and path tricks for --db, --json, --request, --output and file
arguments. The answer is a result (exit 0) or `CODE: detail` on stderr with a non-zero exit,
never a traceback, and a refused command leaves the database exactly as it was.

The commands run in-process (`main(argv)`), in a scratch working directory so that a relative
or `../` path can only land in the test's own temporary folder; a few run as real processes.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from aios_ledger.shell import Database, TaskLedger, verify_log
from aios_ledger.shell.cli import main
from cli_runner import run_cli
from conftest import both_engines
from faults_support import SOAK
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_fixtures import binding, dump

EXAMPLES = 2500 if SOAK else 150
ERROR_LINE = re.compile(r"^[A-Z][A-Z0-9_]*: ", re.MULTILINE)
TOKEN = "hostile-cli-token-0123456789"
SQL = "'; DROP TABLE tasks; --"

# -- hostile values ------------------------------------------------------------------------------

any_text = st.text(st.characters(blacklist_categories=()), max_size=40)
texts = (
    any_text
    | st.sampled_from(
        [
            "",
            " ",
            SQL,
            '" OR 1=1 --',
            "t1",
            "task-hostile",
            "../../etc/passwd",
            "/etc/passwd",
            "\ud800",
            "\udcff",
            "a\x00b",
            "x" * 5000,
            "%s%n{0}",
            "\u202e\u0000",
        ]
    )
    | st.integers().map(str)
)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=16,
)


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


VALID: dict[str, dict[str, Any]] = {
    "create": {
        "idempotency_key": "create-hostile",
        "task": {"task_id": "task-hostile", "goal": "g", "instructions": "i"},
    },
    "claim": {"agent_id": "w2", "capabilities": [], "lease_seconds": 60, "task_id": "t2"},
    "heartbeat": {"task_id": "t1", "lease_token": TOKEN, "lease_seconds": 60},
    "release": {"task_id": "t1", "lease_token": TOKEN, "reason": "worker stopped"},
    "submit": {"task_id": "t1", "lease_token": TOKEN, "result": {"x": 1}, "idempotency_key": "s"},
    "verify": {"task_id": "t1", "decision": "SUCCEEDED", "reason": "r", "idempotency_key": "v"},
    "cancel": {"task_id": "t2", "reason": "r", "idempotency_key": "c"},
    "binding": binding().public(),
}


@st.composite
def near_valid(draw: st.DrawFn, kind: str) -> bytes:
    """A valid request with one field replaced, dropped or added (or its JSON text garbled)."""
    document = dict(VALID[kind])
    action = draw(st.sampled_from(["replace", "drop", "add", "nest", "as-is"]))
    keys = sorted(document)
    if action == "replace":
        document[draw(st.sampled_from(keys))] = draw(json_values)
    elif action == "drop":
        document.pop(draw(st.sampled_from(keys)))
    elif action == "add":
        document[draw(texts)] = draw(json_values)
    elif action == "nest":
        document[draw(st.sampled_from(keys))] = json.loads("[" * 100 + "]" * 100)
    return _encode(document)


raw_documents = st.one_of(
    json_values.map(_encode),
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b"\xff\xfe{}",
            b'{"task_id": "\xc3\x28"}',
            b'{"a": "\\ud800"}',
            b"[" * 100_000,
            b"1" * 5000,
            b"1e999999",
            b'{"a": NaN}',
            b'{"a": Infinity}',
            b'{"a": 1, "a": 2}',
            b"\x00",
            b'{"x": "' + b"y" * (9 * 1024 * 1024) + b'"}',
        ]
    ),
)


def document_for(kind: str | None) -> st.SearchStrategy[bytes]:
    if kind is None:
        return raw_documents
    if kind.endswith(" list"):  # a batch: a JSON list of near-valid requests
        items = st.lists(near_valid(kind.removesuffix(" list")), max_size=3)
        return items.map(lambda parts: b"[" + b",".join(parts) + b"]") | raw_documents
    return near_valid(kind) | raw_documents


# -- command lines -------------------------------------------------------------------------------


@st.composite
def file_argument(draw: st.DrawFn, kind: str | None, workdir: Path) -> tuple[str, bytes | None]:
    """(argument, bytes for stdin or None): a file of hostile bytes, stdin, or a path trick."""
    how = draw(st.sampled_from(["file", "file", "stdin", "trick"]))
    if how == "trick":
        return draw(st.sampled_from(path_tricks(workdir))), None
    data = draw(document_for(kind))
    if how == "stdin":
        return "-", data
    target = workdir / f"input-{len(data)}.json"
    target.write_bytes(data)
    return str(target), None


def path_tricks(workdir: Path) -> list[str]:
    return [
        "../missing.json",
        "/nonexistent/dir/file.json",
        str(workdir),
        "/dev/null",
        "/dev/zero",
        "a\x00b",
        "x" * 5000,
        "/" + "d/" * 3000,
        "\udcff.json",
        str(workdir / "garbage.bin"),
    ]


def db_tricks(workdir: Path) -> list[str]:
    return [
        str(workdir),
        str(workdir / "devnull"),
        str(workdir / "fifo"),
        "/nonexistent/dir/ledger.db",
        "x\x00y.db",
        "z" * 5000,
        "\udcff.db",
        "\ud800.db",
        str(workdir / "garbage.bin"),
        str(workdir / "request.json"),
        "",
    ]


def output_tricks(workdir: Path) -> list[str]:
    return [
        "out.jsonl",
        "../out.jsonl",
        str(workdir),
        str(workdir / "devnull"),
        "/nonexistent/dir/out.jsonl",
        "o\x00.jsonl",
        "o" * 5000,
        "\udcff.jsonl",
    ]


numbers = st.one_of(
    st.integers().map(str),
    st.sampled_from(["-1", "0", "1e309", "nan", "9" * 5000, "0x10", " 7", "", "1_000"]),
    texts,
)

FILE_COMMANDS: dict[str, tuple[list[str], str | None]] = {
    "task create": (["task", "create", "--json"], "create"),
    "claim": (["claim", "--json"], "claim"),
    "heartbeat": (["heartbeat", "--json"], "heartbeat"),
    "release": (["release", "--json"], "release"),
    "submit": (["submit", "--json"], "submit"),
    "task verify": (["task", "verify", "--json"], "verify"),
    "submit batch": (["submit", "--json"], "submit list"),
    "task verify batch": (["task", "verify", "--json"], "verify list"),
    "cancel": (["cancel", "--json"], "cancel"),
    "binding put": (["binding", "put"], "binding"),
    "verify-export": (["verify-export"], None),
    "verify --head": (["verify", "--head"], None),
}


@st.composite
def invocation(draw: st.DrawFn, workdir: Path) -> tuple[list[str], bytes | None, bool]:
    """(argv without --db, stdin bytes, whether the command only reads)."""
    choice = draw(
        st.sampled_from(
            [
                *sorted(FILE_COMMANDS),
                "project",
                "project --pin",
                "run create",
                "run append",
                "run evidence",
                "task show",
                "task list",
                "claim --limit",
                "events",
                "aux list",
                "aux show",
                "export",
                "plain",
                "usage",
            ]
        )
    )
    stdin: bytes | None = None
    if choice in FILE_COMMANDS:
        prefix, kind = FILE_COMMANDS[choice]
        argument, stdin = draw(file_argument(kind, workdir))
        return [*prefix, argument], stdin, choice in {"verify-export", "verify --head"}
    if choice == "project":
        argument, stdin = draw(file_argument(None, workdir))
        recovery = ["--from-source-capture"] if draw(st.booleans()) else []
        return ["project", draw(texts), *recovery, "--request", argument], stdin, False
    if choice == "project --pin":
        argv = ["project", draw(st.just("t1") | texts), "--pin", "--adapter", draw(texts)]
        argv += ["--authorization-id", draw(texts), "--yes"] if draw(st.booleans()) else []
        return [*argv, "--job", draw(texts)] if draw(st.booleans()) else argv, None, False
    if choice == "run create":
        extra = ["--run-id", draw(texts)] if draw(st.booleans()) else []
        return ["run", "create", draw(texts), draw(texts), *extra], None, False
    if choice == "run append":
        argument, stdin = draw(file_argument(None, workdir))
        run_id = draw(st.sampled_from(["run-1"]) | texts)
        return ["run", "append", run_id, draw(texts), "--payload", argument], stdin, False
    if choice == "run evidence":
        argv = ["run", "evidence", draw(texts), draw(st.sampled_from(["run-1"]) | texts)]
        argv += ["--max-events", draw(numbers), "--max-bytes", draw(numbers)]
        return argv, None, True
    if choice == "task show":
        return ["task", "show", draw(texts)], None, True
    if choice == "task list":
        return ["task", "list", "--status", draw(texts), "--limit", draw(numbers)], None, True
    if choice == "claim --limit":
        argument, stdin = draw(file_argument("claim", workdir))
        return ["claim", "--json", argument, "--limit", draw(numbers)], stdin, False
    if choice == "events":
        return ["events", draw(texts)], None, True
    if choice == "aux list":
        argv = ["aux", "list", "--limit", draw(numbers), "--session", draw(texts)]
        return [*argv, "--run", draw(texts)], None, True
    if choice == "aux show":
        return ["aux", "show", draw(texts)], None, True
    if choice == "export":
        scope = ["--all"] if draw(st.booleans()) else ["--task", draw(st.just("t1") | texts)]
        output = draw(st.sampled_from(output_tricks(workdir)))
        return ["export", *scope, "--output", output], None, True
    if choice == "plain":
        command = draw(
            st.sampled_from(
                [["head"], ["status"], ["status", "--json"], ["init"], ["migrate", "--status"]]
            )
        )
        return command, None, True
    junk = draw(st.lists(texts, min_size=0, max_size=4))
    return junk, None, True


# -- the database the commands run against -------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("AIOS_LEDGER_DB", raising=False)
    (cwd / "garbage.bin").write_bytes(os.urandom(4096))
    (cwd / "request.json").write_text("{}")
    # Devices through links in the scratch folder: even a regressed command that renamed over
    # its target would only replace the link, never the device itself.
    (cwd / "devnull").symlink_to("/dev/null")
    os.mkfifo(cwd / "fifo")
    return cwd


pytest_generate_tests = both_engines


@pytest.fixture
def ledger_db(ledger_target: Path) -> Path:
    path = ledger_target
    with TaskLedger(path) as ledger:
        for task_id in ("t1", "t2"):
            ledger.create_task(
                {"task_id": task_id, "goal": "g", "instructions": "i"},
                idempotency_key=f"create-{task_id}",
            )
        ledger.claim(
            agent_id="w1", capabilities=[], lease_seconds=3600, task_id="t1", lease_token=TOKEN
        )
    assert (
        main(["--db", str(path), "run", "create", "session-1", "prompt", "--run-id", "run-1"]) == 0
    )
    return path


def _run(argv: list[str], stdin: bytes | None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    stream = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    with (
        mock.patch.object(sys, "stdin", stream),
        mock.patch.object(sys, "stdout", out),
        mock.patch.object(sys, "stderr", err),
    ):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _check_answer(code: int, out: str, err: str) -> None:
    assert isinstance(code, int)
    assert "Traceback" not in err
    if code == 0:
        return
    assert ERROR_LINE.search(err), err[:400]


def test_every_command_under_hostile_input(
    workdir: Path, ledger_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        argv, stdin, reads = data.draw(invocation(workdir))
        trick = data.draw(st.sampled_from([None] * 6 + db_tricks(workdir)))
        db = str(ledger_db) if trick is None else trick
        before = dump(ledger_db)
        code, out, err = _run(["--db", db, *argv], stdin)
        _check_answer(code, out, err)
        outcome = "ok" if code == 0 else err.split(":", 1)[0]
        seen[outcome] = seen.get(outcome, 0) + 1
        if code != 0 or reads or trick is not None:
            assert dump(ledger_db) == before, (argv, code, err)

    check()
    with Database(ledger_db) as db:
        assert verify_log(db).intact
    print(f"\nhostile CLI: {sum(seen.values())} commands, outcomes {dict(sorted(seen.items()))}")


WORKER = ["worker", "--agent-id", "w", "--exec", "true", "--once"]


@pytest.mark.parametrize(
    "argv",
    [
        [*WORKER, "--lease-seconds", "-5"],
        [*WORKER, "--poll-min", "nan"],
        [*WORKER, "--poll-min", "inf"],
        [*WORKER, "--poll-max", "1e999"],
        [*WORKER, "--grace", "-1"],
        [*WORKER, "--grace", "inf"],
        [*WORKER, "--max-tasks", "0"],
        [*WORKER, "--timeout", "9" * 5000],
        [*WORKER, "--timeout", "-inf"],
        ["worker", "--agent-id", SQL, "--exec", "true", "--once", "--lease-seconds", "0"],
        ["review", "--exec", "true", "--timeout", "inf"],
        ["review", "--exec", "true", "--limit", "0"],
        ["review", "--exec", "true", "--timeout", "-1"],
        ["review", "--exec", "true", "--limit", "x"],
        ["review", "--exec", "true", "--max-attempts", "0"],
        ["review", "--exec", "true", "--max-attempts", "101"],
    ],
)
def test_worker_and_review_refuse_bad_options_before_touching_anything(
    workdir: Path, ledger_db: Path, argv: list[str]
) -> None:
    before = dump(ledger_db)
    code, out, err = _run(["--db", str(ledger_db), *argv], None)
    assert code != 0
    _check_answer(code, out, err)
    assert dump(ledger_db) == before


@pytest.fixture
def real_db(workdir: Path, ledger_db: Path) -> Iterator[Path]:
    (workdir / "binding.json").write_text(json.dumps(VALID["binding"]))
    yield ledger_db


@pytest.mark.parametrize(
    "argv",
    [
        ["task", "show", SQL],
        ["export", "--all", "--output", "."],
        ["verify-export", "/dev/zero"],
        ["run", "create", "s", "p", "--run-id", "r" * 5000],
    ],
)
def test_hostile_arguments_answer_with_a_code(
    real_db: Path, workdir: Path, argv: list[str]
) -> None:
    before = dump(real_db)
    done = run_cli("--db", real_db, *argv, cwd=workdir)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert ERROR_LINE.search(done.stderr), done.stderr
    assert dump(real_db) == before


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        (["task", "create", "--json", "-"], b"\xff\xfe\x00garbage"),
        (["claim", "--json", "-"], b"[" * 200_000),
        (["submit", "--json", "-"], b'{"task_id": "t1", "result": "\\ud800"}'),
    ],
)
def test_hostile_stdin_of_a_real_process_is_answered_with_a_code(
    real_db: Path, workdir: Path, argv: list[str], stdin: bytes
) -> None:
    """Bytes as the interpreter hands a process its stdin (its own stream, its own decoding)."""
    before = dump(real_db)
    done = subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(real_db), *argv],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        cwd=workdir,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0
    assert "Traceback" not in err
    assert ERROR_LINE.search(err), err
    assert dump(real_db) == before


def test_invalid_utf8_in_argv_of_a_real_process(real_db: Path, workdir: Path) -> None:
    """Bytes that are not UTF-8 on the command line (they arrive as lone surrogates)."""
    before = dump(real_db)
    for argv in (
        [b"task", b"show", b"\xff\xfe"],
        [b"run", b"create", b"s\xff", b"p"],
        [b"--db", b"\xff.db", b"init"],
        [b"verify-export", b"\xff.jsonl"],
    ):
        args = [sys.executable.encode(), b"-m", b"aios_ledger.shell.cli"]
        if argv[0] != b"--db":
            args += [b"--db", os.fsencode(real_db)]
        done = subprocess.run(
            args + argv, capture_output=True, timeout=60, check=False, cwd=workdir
        )
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode != 0, argv
        assert "Traceback" not in err, err
        assert ERROR_LINE.search(err), err
    assert dump(real_db) == before


def test_export_writes_through_a_fifo_instead_of_replacing_it(
    workdir: Path, ledger_db: Path
) -> None:
    """`--output` naming a device or a FIFO (/dev/null, /dev/stdout) must not rename a file over
    it (as root, that replaced /dev/null itself with a regular file)."""
    fifo = workdir / "fifo"
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, out, err = _run(["--db", str(ledger_db), "export", "--all", "--output", str(fifo)], None)
    reader.join(timeout=30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    summary = json.loads(out)
    # The header, the events, one line per state row (an export of everything), the trailer.
    assert received and received[0].count(b"\n") == summary["events"] + summary["state_rows"] + 2
    assert not (workdir / "fifo.partial").exists()
    assert stat.S_ISCHR(os.stat(workdir / "devnull").st_mode)


@pytest.mark.parametrize("name", ["fifo", "devnull"])
def test_a_database_path_that_is_no_regular_file_is_refused(
    workdir: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert main(["--db", str(workdir / name), "init"]) == 1
    assert capsys.readouterr().err.startswith("DATABASE_PATH_INVALID: ")
    assert sorted(path.name for path in Path("/dev").glob("null-*")) == []


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--db", "\udcff.db", "init"], "DATABASE_PATH_INVALID"),
        (["--db", "z" * 5000, "init"], "DATABASE_PATH_INVALID"),
        (["--db", "z" * 5000, "head"], "DATABASE_PATH_INVALID"),
        (["events", "\ud800"], "FIELDS_INVALID"),
        (["aux", "show", "\udcff"], "TEXT_INVALID"),
        (["export", "--task", "\ud800", "--output", "out.jsonl"], "TEXT_INVALID"),
        (["verify", "--head", "a\x00b"], "INPUT_UNREADABLE"),
        (["task", "create", "--json", "a\x00b"], "INPUT_UNREADABLE"),
        (["verify-export", "a\x00b"], "INPUT_UNREADABLE"),
        (["verify-export", "/dev/zero"], "INPUT_UNREADABLE"),
        (["export", "--all", "--output", "o\x00.jsonl"], "OUTPUT_UNWRITABLE"),
        (["export", "--all", "--output", "."], "OUTPUT_UNWRITABLE"),
        (["export", "--all", "--output", "/"], "OUTPUT_UNWRITABLE"),
    ],
)
def test_crashes_found_by_the_hostile_run_stay_fixed(
    workdir: Path, ledger_db: Path, argv: list[str], code: str
) -> None:
    before = dump(ledger_db)
    if argv[0] != "--db":
        argv = ["--db", str(ledger_db), *argv]
    answer, _, err = _run(argv, None)
    assert answer == 1
    assert err.startswith(f"{code}: "), err
    assert dump(ledger_db) == before
