"""The mistakes a new user makes with workers, the server and roles, each answered with what to
do: a refused token or a server that is down, an idle worker that says why, `--agent-id` beside
`--api`, an `--exec` program that does not exist, a governed result the ledger refuses, `serve`
on an address in use, Ctrl-C, and refusals that name the role or the value expected."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core.work import IdleReason, exec_program, idle_reason
from api_server import ApiServer, free_port
from git_support import AGENT as GIT_AGENT
from git_support import binding, governed_task, make_repository, register
from signal_support import interruptible
from test_remote_work import remote
from test_worker_e2e import ROOT, cli, create, event_types, spawn_worker, task

CLI = (sys.executable, "-m", "aios_ledger.shell.cli")
# An agent that does the example agent's work (it commits NOTES.md in its workspace) but states
# other files than it changed: the ledger refuses such a result (RESULT_GOVERNANCE_VIOLATION).
MISSTATING_AGENT = (
    f"{sys.executable} {ROOT / 'examples' / 'agent.py'} | {sys.executable} -c "
    "\"import json, sys; r = json.load(sys.stdin); r['changed_files'] = ['OTHER.md']; "
    'json.dump(r, sys.stdout)"'
)


def test_a_refused_governed_result_submits_a_failure_naming_the_first_cause(
    tmp_path: Path,
) -> None:
    """Without stating the proposal's files, the failure result was refused as well, and the
    task stayed CLAIMED until its lease passed, the log naming the second refusal."""
    db = tmp_path / "ledger.db"
    bare, base = make_repository(tmp_path)
    register(db, bare)
    governed_task(db, "task-misstated", binding("task-misstated", base))
    worked = cli(
        db,
        "worker",
        "--agent-id",
        GIT_AGENT,
        "--capability",
        "agent.runtime.openclaw",
        "--exec",
        MISSTATING_AGENT,
        "--once",
    )
    assert worked.returncode == 0, worked.stderr
    (outcome,) = json.loads(worked.stdout)["tasks"]
    assert outcome["outcome"] == "failure-submitted", outcome
    assert "RESULT_GOVERNANCE_VIOLATION" in worked.stderr
    done = task(db, "task-misstated")
    assert done["status"] == "SUBMITTED"
    assert done["result"]["status"] == "FAILED"
    assert done["result"]["changed_files"] == ["NOTES.md"]  # what the proposal holds
    assert done["result"]["summary"].startswith("result_refused: RESULT_GOVERNANCE_VIOLATION")
    assert event_types(db, "task-misstated")[-1] == "RESULT_SUBMITTED"


def test_serve_on_an_address_in_use_is_one_usage_error_and_never_says_serving(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    assert cli(db, "init").returncode == 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # A process of its own: were the address taken anyway, `serve` would serve until the
        # timeout ends it, not for ever.
        served = subprocess.run(
            [*CLI, "--db", str(db), "serve", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert served.returncode == 2, served.stderr
    assert served.stderr.startswith(f"ADDRESS_IN_USE: 127.0.0.1:{port} is already in use")
    assert "serving" not in served.stderr
    assert "Traceback" not in served.stderr


def test_an_exec_program_that_does_not_exist_is_refused_before_any_claim(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-untouched")
    missing = cli(db, "worker", "--agent-id", "w", "--exec", "no-such-agent --flag", "--once")
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.startswith("EXEC_NOT_FOUND: --exec runs 'no-such-agent'")
    assert "PATH" in missing.stderr
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    refused = cli(db, "worker", "--agent-id", "w", "--exec", f"MODE=x {script}", "--once")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"EXEC_NOT_EXECUTABLE: --exec runs '{script}'")
    reviewed = cli(db, "review", "--exec", str(tmp_path / "nowhere"))
    assert reviewed.returncode == 2
    assert reviewed.stderr.startswith("EXEC_NOT_FOUND")
    assert task(db, "task-untouched")["status"] == "QUEUED"
    assert event_types(db, "task-untouched") == ["TASK_CREATED"]


def test_which_exec_words_are_checked() -> None:
    assert exec_program("python3 agent.py") == "python3"
    assert exec_program("A=1 B=2 /opt/agent --x") == "/opt/agent"
    # The shell decides these: a builtin, shell syntax, a path relative to the workspace.
    for command in ("cd work && ./run", "$AGENT", "(agent)", "./agent.sh", "", "'unbalanced"):
        assert exec_program(command) is None, command


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "ledger.db") as running:
        yield running


def remote_process(*argv: str) -> subprocess.CompletedProcess[str]:
    """`remote` in a process of its own, for a command that could run forever: the timeout ends
    it, and the test fails."""
    return subprocess.run(
        [*CLI, "--db", "/nonexistent/no.db", *argv], capture_output=True, text=True, timeout=60
    )


def test_a_revoked_token_stops_worker_and_review_at_once(server: ApiServer, tmp_path: Path) -> None:
    """A refused token used to be logged as a refused claim: `--until-empty` exited 0 with no
    task, and a long-running worker retried it forever (here: the subprocess timeout)."""
    create(server.db, "task-for-the-revoked")
    token = server.token_file(tmp_path, "revoked-agent", "agent", "reviewer")
    cli(server.db, "token", "revoke", "revoked-agent")
    api = ["--api", server.url, "--token-file", str(token)]
    for mode in (["--until-empty"], []):
        worked = remote_process("worker", *api, "--exec", "true", *mode)
        assert worked.returncode == 1, worked.stderr
        assert worked.stderr.startswith("UNAUTHENTICATED: ")
        assert "aios-ledger token issue" in worked.stderr
    reviewed = remote_process("review", *api, "--exec", "true")
    assert reviewed.returncode == 1
    assert reviewed.stderr.startswith("UNAUTHENTICATED: ")
    assert task(server.db, "task-for-the-revoked")["status"] == "QUEUED"
    assert token.read_text().strip() not in worked.stderr


def test_an_api_that_is_down_is_an_error_of_a_finite_run(tmp_path: Path) -> None:
    token = tmp_path / "agent.token"
    token.write_text("a-token-for-a-server-that-is-not-there\n")
    down = f"http://127.0.0.1:{free_port()}"
    for mode in ("--once", "--until-empty"):
        worked = remote("worker", "--api", down, "--token-file", str(token), "--exec", "true", mode)
        assert worked.returncode == 1, worked.stderr
        assert worked.stderr.startswith("API_UNAVAILABLE: ")


def test_a_long_running_worker_waits_for_its_api(tmp_path: Path) -> None:
    """Started before its server, it says so and keeps trying; then works as usual."""
    port = free_port()
    token = tmp_path / "agent.token"
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "aios_ledger.shell.cli", "--db", "/nonexistent/no.db"),
            *("worker", "--api", f"http://127.0.0.1:{port}", "--token-file", str(token)),
            *("--exec", "true"),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        token.write_text("not-yet-checked-token-0123456789\n")
        assert worker.stderr is not None
        waiting = worker.stderr.readline()
        assert "API_UNAVAILABLE" in waiting and "trying again" in waiting, waiting
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.communicate(timeout=60)


def test_agent_id_beside_api_must_be_the_tokens_name(server: ApiServer, tmp_path: Path) -> None:
    create(server.db, "task-named")
    token = server.token_file(tmp_path, "named-agent", "agent")
    api = ["--api", server.url, "--token-file", str(token), "--exec", "true", "--once"]
    other = remote("worker", *api, "--agent-id", "someone-else")
    assert other.returncode == 2, other.stderr
    assert other.stderr.startswith("AGENT_MISMATCH: ")
    assert "'named-agent'" in other.stderr and "'someone-else'" in other.stderr
    assert task(server.db, "task-named")["status"] == "QUEUED"
    # Without --agent-id the token's name is the agent's id.
    worked = remote("worker", *api)
    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["agent_id"] == "named-agent"
    assert task(server.db, "task-named")["claimed_by"] is None
    assert task(server.db, "task-named")["status"] == "SUBMITTED"


def test_a_role_refusal_names_the_role_needed_and_the_roles_held(server: ApiServer) -> None:
    reviewer = server.client(token=server.issue("only-a-reviewer", "reviewer", "auditor"))
    answer = reviewer.post("/v1/claims", json={"capabilities": [], "lease_seconds": 60})
    assert answer.status_code == 403
    problem = answer.json()
    assert problem["code"] == "FORBIDDEN"
    assert problem["detail"].startswith(
        "claim needs the role agent; the token 'only-a-reviewer' has reviewer, auditor"
    )


def test_a_second_ctrl_c_kills_the_agent_and_releases_its_task_at_once(tmp_path: Path) -> None:
    """Without it the worker waited the whole grace period (here: past the subprocess
    timeout) for an agent that would not end."""
    db = tmp_path / "ledger.db"
    create(db, "task-hurried")
    worker = spawn_worker(db, "--agent-id", "w", "--exec", "sleep 600", "--grace", "600")
    try:
        assert worker.stderr is not None
        for line in worker.stderr:
            if "task-hurried attempt 1: started" in line:
                break
        worker.send_signal(signal.SIGINT)
        for line in worker.stderr:
            if "SIGINT, stopping" in line:
                break
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, err
    assert "Traceback" not in err
    (outcome,) = json.loads(out)["tasks"]
    assert outcome["outcome"] == "released", err
    assert task(db, "task-hurried")["status"] == "QUEUED"


def importing_the_ledger(pid: int) -> bool:
    """Whether the process is importing the command line yet: `_hashlib` (the core's digests,
    among its first imports; the interpreter's start and the console script load none) is
    mapped, and the rest of the imports take a good while longer. (Not apsw: a command refused
    before it opens a ledger never loads its engine; not jsonschema's rpds: it is loaded when a
    contract is checked.)"""
    try:
        return "/_hashlib." in Path(f"/proc/{pid}/maps").read_text()
    except FileNotFoundError:
        return False


def test_ctrl_c_while_the_command_line_is_still_starting_prints_no_traceback(
    tmp_path: Path,
) -> None:
    """The console script used to import the whole command line before any guard: a SIGINT
    during those imports ended in a traceback."""
    script = Path(sys.executable).with_name("aios-ledger")
    # The imports take a fraction of a second: on a loaded machine the process may be past
    # them (and refused, for want of --exec) before it is seen importing; then it starts again.
    for _ in range(20):
        started = subprocess.Popen(
            interruptible(
                [str(script), "--db", str(tmp_path / "l.db"), "worker", "--agent-id", "w", "--once"]
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while started.poll() is None and not importing_the_ledger(started.pid):
            pass
        if started.poll() is None:
            break
        started.communicate()
    else:
        pytest.fail("the command line was never seen importing the ledger")
    started.send_signal(signal.SIGINT)
    _out, err = started.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert started.returncode == 130, err
    assert err.strip().endswith("INTERRUPTED: stopped by the user")


def test_an_idle_worker_says_why_nothing_was_claimable(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert cli(db, "init").returncode == 0
    empty = cli(db, "worker", "--agent-id", "w", "--exec", "true", "--until-empty")
    assert empty.returncode == 0, empty.stderr
    assert json.loads(empty.stdout)["idle"]["reason"] == "no queued task"
    assert "nothing to claim: no queued task" in empty.stderr
    for number in (1, 2, 3):
        create(db, f"task-gpu-{number}", required_capabilities=["gpu", "cuda"])
    create(db, "task-later", not_before="2999-01-01T00:00:00.000Z")
    idle = cli(db, "worker", "--agent-id", "w", "--capability", "cuda", "--exec", "true", "--once")
    assert idle.returncode == 0, idle.stderr
    summary = json.loads(idle.stdout)
    assert summary["tasks"] == []
    reason = (
        "3 queued tasks need capabilities you do not offer: gpu; "
        "1 queued task is not due before 2999-01-01T00:00:00.000Z"
    )
    assert summary["idle"]["reason"] == reason
    assert (summary["idle"]["lacking_capabilities"], summary["idle"]["not_due"]) == (3, 1)
    assert f"nothing to claim: {reason}" in idle.stderr


def test_the_idle_reason_counts_each_task_once() -> None:
    groups = [
        {"required_capabilities_json": '["gpu"]', "not_due": 1, "tasks": 2, "earliest": "b"},
        {"required_capabilities_json": "[]", "not_due": 1, "tasks": 1, "earliest": "c"},
        {"required_capabilities_json": "[]", "not_due": 1, "tasks": 1, "earliest": "a"},
        {"required_capabilities_json": '["x"]', "not_due": 0, "tasks": 4, "earliest": None},
    ]
    reason = idle_reason(groups, ["x"])
    assert (reason.queued, reason.lacking, reason.missing) == (8, 2, ("gpu",))
    assert (reason.not_due, reason.due_from) == (2, "a")
    assert reason.text().endswith("4 queued tasks were taken by another worker meanwhile")


def test_an_idle_worker_over_the_api_says_why_too(server: ApiServer, tmp_path: Path) -> None:
    """Under its token's grant: a task that needs a capability the token is not granted is
    told as such (offering it would be refused); before, the reason said to offer it."""
    create(server.db, "task-needs-gpu", required_capabilities=["gpu"])
    token = server.token_file(tmp_path, "cpu-agent", "agent")
    idle = remote(
        "worker", "--api", server.url, "--token-file", str(token), "--exec", "true", "--once"
    )
    assert idle.returncode == 0, idle.stderr
    reason = (
        "1 queued task needs capabilities your token is not granted: gpu (offering them is "
        "refused CAPABILITY_NOT_GRANTED: the ledger's owner issues a token granted them)"
    )
    shown = json.loads(idle.stdout)["idle"]
    assert shown["reason"] == reason
    assert (shown["ungranted"], shown["ungranted_capabilities"]) == (1, ["gpu"])
    assert shown["lacking_capabilities"] == 0
    assert f"nothing to claim: {reason}" in idle.stderr
    # A token granted the capability, offering none: the worker could offer it.
    granted = server.token_file(tmp_path, "gpu-agent", "agent", capabilities=["gpu"])
    idle = remote(
        "worker", "--api", server.url, "--token-file", str(granted), "--exec", "true", "--once"
    )
    assert idle.returncode == 0, idle.stderr
    reason = "1 queued task needs capabilities you do not offer: gpu"
    assert json.loads(idle.stdout)["idle"]["reason"] == reason


def test_the_idle_reason_tells_an_ungranted_capability_from_one_not_offered() -> None:
    groups = [
        {"required_capabilities_json": '["gpu"]', "not_due": 0, "tasks": 2, "earliest": None},
        {"required_capabilities_json": '["gpu", "py"]', "not_due": 1, "tasks": 1, "earliest": "a"},
        {"required_capabilities_json": '["py"]', "not_due": 0, "tasks": 3, "earliest": None},
        {"required_capabilities_json": "[]", "not_due": 1, "tasks": 1, "earliest": "b"},
    ]
    reason = idle_reason(groups, [], grant=["py"])
    assert (reason.ungranted, reason.ungranted_capabilities) == (3, ("gpu",))
    assert (reason.lacking, reason.missing) == (3, ("py",))
    assert (reason.not_due, reason.due_from) == (1, "b")
    assert reason.text().startswith("3 queued tasks need capabilities your token is not granted")
    assert IdleReason.from_public(reason.public()) == reason
    # No grant (the local ledger, a token with no ceiling): nothing is ungranted.
    assert idle_reason(groups, [], grant=None).ungranted == 0
    assert idle_reason(groups, [], grant=None).lacking == 6
