"""docs/running-agents.md as run: each agent command line the page gives goes through
`examples/run_agent.py` and a real worker (in this process) on a SQLite ledger, with a stand-in
for the agent's program on PATH that records how it was called and commits in its workspace.
The governed repository is only read; the agent's commit comes back as the attempt's proposal,
and lands by the owner's governed write after review."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from cli_runner import CliResult, run_cli
from git_support import (
    CAPABILITY,
    binding,
    events_of,
    git,
    governed_task,
    make_repository,
    ref,
    register,
    repository_files,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "running-agents.md"
WRAPPER = ROOT / "examples" / "run_agent.py"
# The agent's words after the wrapper, as the page's `--exec` gives them.
EXEC = re.compile(r'--exec "python3 \$wrapper -- ([^"]+)"')

# A stand-in for an agent's program: it records its arguments, what it got on stdin, where it
# ran and the prompt files it was given, prints on both streams, then edits AGENT.md and commits
# it (or leaves it uncommitted, or fails) as the test asks.
STAND_IN = f"""#!{sys.executable}
import json, os, subprocess, sys
record = {{
    "argv": sys.argv[1:],
    "stdin": sys.stdin.read(),
    "cwd": os.getcwd(),
    "files": {{a: open(a).read() for a in sys.argv[1:] if os.path.isfile(a)}},
}}
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
print("thinking about the task")
print("reading the code", file=sys.stderr)
if os.environ.get("STAND_IN_EXIT", "0") != "0":
    print("giving up", file=sys.stderr)
    raise SystemExit(int(os.environ["STAND_IN_EXIT"]))
if os.environ.get("STAND_IN_EDIT", "1") == "1":
    with open("AGENT.md", "a") as out:
        out.write("edited by " + os.path.basename(sys.argv[0]) + "\\n")
    if os.environ.get("STAND_IN_COMMIT", "1") == "1":
        subprocess.run(["git", "add", "AGENT.md"], check=True)
        subprocess.run(["git", "commit", "--quiet", "-m", "Edit AGENT.md"], check=True)
if "--output-format" in sys.argv and "json" in sys.argv:  # as Claude Code's -p answers
    print(json.dumps({{"type": "result", "result": "done", "session_id": "stand-in"}}))
else:
    print("done")
"""


def documented_agents() -> dict[str, str]:
    """Each agent's words in the page's `--exec`, by program."""
    found = {shlex.split(words)[0]: words for words in EXEC.findall(PAGE.read_text())}
    # Inside the page's double quotes only $, ` and \\ would mean something to the reader's
    # shell; none does here, so the words reach `sh -c` as written.
    assert all(not set("$`\\") & set(words) for words in found.values()), found
    return found


AGENTS = documented_agents()


def test_the_page_gives_the_four_agents() -> None:
    assert sorted(AGENTS) == ["aider", "claude", "codex", "openhands"]


class Stage:
    """A ledger governing one repository, and a folder of stand-in agent programs on PATH."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        self.bare, self.base = make_repository(root)
        register(self.db, self.bare)
        self.bin = root / "bin"
        self.bin.mkdir()
        for program in AGENTS:
            stand_in = self.bin / program
            stand_in.write_text(STAND_IN)
            stand_in.chmod(0o755)
        self.log = root / "calls.jsonl"

    def govern(self, task_id: str) -> None:
        governed_task(self.db, task_id, binding(task_id, self.base))

    def work(self, words: str, **stand_in: str) -> CliResult:
        """`worker --once` with the wrapper running `words` (the page's part after `--`)."""
        env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "STAND_IN_LOG": str(self.log),
            **{f"STAND_IN_{name.upper()}": value for name, value in stand_in.items()},
        }
        return run_cli(
            "--db",
            self.db,
            "worker",
            "--agent-id",
            "agent-7",
            "--capability",
            CAPABILITY,
            "--exec",
            f"{sys.executable} {WRAPPER} -- {words}",
            "--once",
            "--timeout",
            "120",
            env=env,
            cwd=self.root,
        )

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def task(self, task_id: str) -> dict[str, Any]:
        with TaskLedger(self.db) as ledger:
            return dict(ledger.get(task_id))

    def run_events(self, task_id: str) -> list[tuple[str, Any]]:
        """The kinds and payloads of the first attempt's run: the evidence a reviewer reads."""
        with RunStore(self.db) as runs:
            events = runs.run_events(f"{task_id}@1")
        return [(event.kind, json.loads(event.payload_json)) for event in events]


@pytest.fixture
def stage(tmp_path: Path) -> Stage:
    return Stage(tmp_path)


@pytest.mark.parametrize("program", sorted(AGENTS))
def test_each_documented_command_line_proposes_its_commit(stage: Stage, program: str) -> None:
    task_id = f"task-{program}"
    stage.govern(task_id)
    before = repository_files(stage.bare)
    worked = stage.work(AGENTS[program])
    assert worked.returncode == 0, worked.stderr
    assert [t["outcome"] for t in json.loads(worked.stdout)["tasks"]] == ["submitted"]

    (call,) = stage.calls()
    # The page's words, with the task in place of {prompt} or in the file {prompt_file} names.
    expected = shlex.split(AGENTS[program])[1:]
    assert len(call["argv"]) == len(expected)
    prompts = []
    for given, written in zip(call["argv"], expected, strict=True):
        if written == "{prompt}":
            prompts.append(given)
        elif written == "{prompt_file}":
            prompts.append(call["files"][given])
            assert not given.startswith(call["cwd"])  # never in the workspace, never committed
        else:
            assert given == written
    (prompt,) = prompts
    assert prompt.startswith(f"Task {task_id} (attempt 1): Improve widgets ({task_id})")
    assert "Work on the bound branch only." in prompt
    assert f"on the branch agent/{task_id} at {stage.base}" in prompt
    assert call["stdin"] == ""
    assert Path(call["cwd"]).name == "work" and not Path(call["cwd"]).exists()

    # The commit came back as a proposal, the result states its file, the repository is as it
    # was, and what the agent printed on either stream is evidence.
    assert events_of(stage.db, task_id)[-2:] == ["PROPOSAL_RECORDED", "RESULT_SUBMITTED"]
    assert stage.task(task_id)["status"] == "SUBMITTED"
    assert repository_files(stage.bare) == before
    events = stage.run_events(task_id)
    (proposal,) = [payload for kind, payload in events if kind == "proposal"]
    assert proposal["changed_files"] == ["AGENT.md"]
    lines = [payload["line"] for kind, payload in events if kind == "stderr"]
    assert "thinking about the task" in lines and "reading the code" in lines
    if "--output-format" in expected:  # the whole JSON answer is evidence, its text the summary
        assert any('"session_id": "stand-in"' in line for line in lines)
    result = stage.task(task_id)["result"]
    assert result["changed_files"] == ["AGENT.md"]
    assert result["summary"].startswith(f"{program} changed AGENT.md")
    assert result["summary"].endswith("done")

    # Reviewed and written by the owner, the agent's commit is the branch; main is untouched.
    with TaskLedger(stage.db) as ledger:
        ledger.verify(
            task_id,
            decision="SUCCEEDED",
            reason="reviewed",
            idempotency_key=f"verify-{task_id}",
            reviewer="reviewer-1",
        )
    request = stage.root / "write.json"
    request.write_text(json.dumps({"idempotency_key": f"write-{task_id}"}))
    landed = run_cli("--db", stage.db, "write", task_id, "--json", request)
    assert landed.returncode == 0, landed.stderr
    assert json.loads(landed.stdout)["state"] == "APPLIED"
    head = ref(stage.bare, f"refs/heads/agent/{task_id}")
    assert head is not None and head == proposal["head_oid"]
    assert ref(stage.bare, "refs/heads/main") == stage.base
    assert git("--git-dir", str(stage.bare), "show", f"{head}:AGENT.md") == f"edited by {program}"
    assert git("--git-dir", str(stage.bare), "log", "-1", "--format=%an", head) == "agent-7"


def test_what_the_agent_leaves_uncommitted_is_committed_by_the_wrapper(stage: Stage) -> None:
    stage.govern("task-dirty")
    worked = stage.work(AGENTS["codex"], commit="0")
    assert worked.returncode == 0, worked.stderr
    result = stage.task("task-dirty")["result"]
    assert result["changed_files"] == ["AGENT.md"]
    events = stage.run_events("task-dirty")
    assert ("stderr", {"line": "committed what the agent left uncommitted"}) in events
    (proposal,) = [payload for kind, payload in events if kind == "proposal"]
    assert proposal["changed_files"] == ["AGENT.md"]


@pytest.mark.parametrize(
    ("stand_in", "why"),
    [
        pytest.param({"exit": "3"}, "claude exited with status 3", id="agent-fails"),
        pytest.param({"edit": "0"}, "claude changed no file: nothing to propose", id="no-change"),
    ],
)
def test_an_agent_that_fails_or_changes_nothing_is_a_failure_with_evidence(
    stage: Stage, stand_in: dict[str, str], why: str
) -> None:
    stage.govern("task-fail")
    worked = stage.work(AGENTS["claude"], **stand_in)
    assert worked.returncode == 0, worked.stderr
    assert [t["outcome"] for t in json.loads(worked.stdout)["tasks"]] == ["failure-submitted"]
    events = stage.run_events("task-fail")
    assert "proposal" not in [kind for kind, _ in events]
    (failure,) = [payload for kind, payload in events if kind == "failure"]
    assert failure["failure"] == "exit_status"
    assert failure["stderr_tail"][-1] == why
    result = stage.task("task-fail")["result"]
    assert result["status"] == "FAILED" and why in result["summary"]


def test_a_task_bound_to_a_repository_not_governed_here_never_runs_the_agent(
    stage: Stage,
) -> None:
    """Without a workspace the agent would edit the worker's own directory for a task meant for
    another repository: the wrapper refuses before starting it."""
    governed_task(
        stage.db, "task-elsewhere", binding("task-elsewhere", stage.base, repository="acme/other")
    )
    worked = stage.work(AGENTS["codex"])
    assert worked.returncode == 0, worked.stderr
    assert [t["outcome"] for t in json.loads(worked.stdout)["tasks"]] == ["failure-submitted"]
    assert not stage.log.exists()
    (failure,) = [p for kind, p in stage.run_events("task-elsewhere") if kind == "failure"]
    assert failure["stderr_tail"] == ["no workspace: acme/other is not governed here"]


def test_a_plain_task_runs_the_agent_where_the_worker_runs(stage: Stage) -> None:
    """No binding, no workspace: the agent works in the worker's directory, nothing is
    committed or proposed, and the result is a status and a summary."""
    with TaskLedger(stage.db) as ledger:
        ledger.create_task(
            {"task_id": "task-plain", "goal": "Say hello", "instructions": "Print a greeting."},
            idempotency_key="create-task-plain",
        )
    worked = stage.work(AGENTS["aider"], edit="0")
    assert worked.returncode == 0, worked.stderr
    (call,) = stage.calls()
    assert call["cwd"] == str(stage.root)
    (prompt,) = call["files"].values()
    assert prompt == "Task task-plain (attempt 1): Say hello\n\nInstructions:\nPrint a greeting.\n"
    task = stage.task("task-plain")
    assert task["status"] == "SUBMITTED"
    assert task["result"] == {
        "status": "SUCCEEDED",
        "summary": "thinking about the task\ndone",
    }
    assert "PROPOSAL_RECORDED" not in events_of(stage.db, "task-plain")
