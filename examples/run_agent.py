#!/usr/bin/env python3
"""Run a coding agent's command line as the worker's command (docs/running-agents.md).

    aios-ledger worker ... --exec "python3 /abs/path/run_agent.py -- claude -p {prompt} ..."

The words after `--` are the agent's command line, run without a shell; in them `{prompt}` is
replaced by the task written as a prompt, and `{prompt_file}` by the path of a file holding it
(outside the workspace, so it is never committed). The wrapper reads the claim the worker
writes on stdin, runs the agent in the current directory (a governed task's workspace) with
nothing on its stdin, and copies every line the agent prints to stderr, where the worker
records it as the task's evidence. When the agent exits 0 it commits whatever the agent left
uncommitted, on the workspace's branch, and prints the result the worker submits: a governed
task's result contract, with the files the commits changed, or a plain task's status and
summary. An agent that exits non-zero makes the wrapper exit with its status, and the worker
submits a failure result with the evidence. Standard library only.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import IO, Any

# What the summary quotes of the agent's last words, and how many changed files it names.
SUMMARY_CHARACTERS = 2000
SUMMARY_FILES = 20


def progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def prompt_of(claim: dict[str, Any]) -> str:
    """The task as the agent reads it; the claim's lease token never reaches the worker's
    command, so it cannot reach the prompt either."""
    lines = [
        f"Task {claim['task_id']} (attempt {claim['attempt']}): {claim.get('goal') or ''}".strip()
    ]
    if claim.get("instructions"):
        lines += ["", "Instructions:", str(claim["instructions"])]
    criteria = claim.get("success_criteria")
    if isinstance(criteria, list) and criteria:
        lines += ["", "Success criteria:"]
        for criterion in criteria:
            if isinstance(criterion, dict):
                lines.append(f"- {criterion.get('id')}: {criterion.get('description')}")
            else:
                lines.append(f"- {criterion}")
    if claim.get("constraints"):
        lines += ["", "Constraints:", json.dumps(claim["constraints"], sort_keys=True)]
    envelope = claim.get("envelope")
    if isinstance(envelope, dict) and isinstance(envelope.get("binding"), dict):
        binding = envelope["binding"]
        lines += [
            "",
            f"You work in a git working copy of {binding['repository']}, on the branch "
            f"{binding['target_branch']} at {binding['base_oid']}. Commit your changes on this "
            "branch. There is no remote and nothing to push: your commits are proposed to a "
            "reviewer, and only a governed write after review puts them on the repository.",
        ]
    return "\n".join(lines) + "\n"


def agent_argv(words: Sequence[str], prompt: str, prompt_file: str) -> list[str]:
    return [
        word.replace("{prompt_file}", prompt_file).replace("{prompt}", prompt) for word in words
    ]


def run_agent(argv: list[str]) -> tuple[int, list[str]]:
    """Run the agent; both of its streams go to stderr a whole line at a time (the worker's
    stdout is the result's alone, and lines of the two streams never mix). Its exit status,
    and the last lines it printed on stdout."""
    tail: collections.deque[str] = collections.deque(maxlen=40)
    try:
        agent = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        progress(f"cannot start {argv[0]}: {exc}")
        return 127, []
    assert agent.stdout is not None and agent.stderr is not None  # pipes
    lock = threading.Lock()

    def forward(stream: IO[str], kept: collections.deque[str] | None) -> None:
        for line in stream:
            with lock:
                progress(line.rstrip("\n"))
            if kept is not None:
                kept.append(line.rstrip("\n"))

    errors = threading.Thread(target=forward, args=(agent.stderr, None))
    errors.start()
    forward(agent.stdout, tail)
    errors.join()
    return agent.wait(), list(tail)


def last_words(lines: list[str]) -> str:
    """What the agent said last, for the summary: the `result` text of a final JSON object
    (Claude Code's `--output-format json`), else the end of its output."""
    printed = [line for line in lines if line.strip()]
    if printed:
        try:
            final: object = json.loads(printed[-1])
        except ValueError:
            final = None
        answer = final.get("result") if isinstance(final, dict) else None
        if isinstance(answer, str):
            return answer.strip()[-SUMMARY_CHARACTERS:]
    return "\n".join(printed).strip()[-SUMMARY_CHARACTERS:]


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL
    ).stdout


def commit_leftovers(task_id: str) -> None:
    """Commit what the agent changed but did not commit, as the agent (the worker sets the
    author and committer in the environment)."""
    if git("status", "--porcelain", "--untracked-files=all"):
        git("add", "--all")
        git("commit", "--quiet", "--no-verify", "-m", f"Work on {task_id} left uncommitted")
        progress("committed what the agent left uncommitted")


def changed_files(base_oid: str) -> list[str]:
    """The files the commits on the branch change since the base, as the ledger computes them
    for the proposal."""
    listed = git("diff-tree", "-r", "-z", "--no-renames", "--name-only", base_oid, "HEAD")
    return sorted(name for name in listed.split("\0") if name)


def governed_result(
    claim: dict[str, Any], envelope: dict[str, Any], changed: list[str], summary: str
) -> dict[str, Any]:
    binding = envelope["binding"]
    return {
        "task_id": claim["task_id"],
        "job_id": envelope["job_id"],
        "execution_digest": envelope["execution_digest"],
        "execution_mode": "agent_runtime",
        "status": "SUCCEEDED",
        "summary": summary,
        "changed_files": changed,
        "repository": binding["repository"],
        "target_branch": binding["target_branch"],
        "generation": binding["generation"],
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
    }


def main(argv: Sequence[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        progress("usage: run_agent.py -- AGENT [ARG...]  ({prompt}, {prompt_file} are replaced)")
        return 2
    words = argv[argv.index("--") + 1 :]
    claim = json.load(sys.stdin)
    envelope = claim.get("envelope")
    governed = isinstance(envelope, dict) and isinstance(envelope.get("binding"), dict)
    if governed and not os.environ.get("AIOS_WORKSPACE"):
        # Bound to a repository the worker's ledger does not govern: running the agent here
        # would edit the worker's own directory for a task meant for that repository.
        progress(f"no workspace: {envelope['binding']['repository']} is not governed here")
        return 1
    prompt = prompt_of(claim)
    with tempfile.TemporaryDirectory(prefix="aios-prompt-") as folder:
        prompt_file = os.path.join(folder, "prompt.md")
        with open(prompt_file, "w", encoding="utf-8") as out:
            out.write(prompt)
        command = agent_argv(words, prompt, prompt_file)
        progress(f"task {claim['task_id']} attempt {claim['attempt']}: running {command[0]}")
        status, lines = run_agent(command)
    if status != 0:
        progress(f"{command[0]} exited with status {status}")
        return status if 0 < status < 256 else 1
    said = last_words(lines)
    if not governed:
        # A plain task: no workspace, so nothing to commit or to state.
        summary = said or f"{command[0]} finished"
        json.dump({"status": "SUCCEEDED", "summary": summary}, sys.stdout)
        return 0
    commit_leftovers(str(claim["task_id"]))
    changed = changed_files(str(envelope["binding"]["base_oid"]))
    if not changed:
        progress(f"{command[0]} changed no file: nothing to propose")
        return 1
    named = ", ".join(changed[:SUMMARY_FILES])
    more = len(changed) - SUMMARY_FILES
    summary = f"{command[0]} changed {named}" + (f" and {more} more files" if more > 0 else "")
    if said:
        summary += "\n\n" + said
    json.dump(governed_result(claim, envelope, changed, summary), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
