#!/usr/bin/env python3
"""An example agent for `aios-ledger worker --exec 'python3 examples/agent.py'`.

It reads its claim (task, execution envelope, runtime input) as JSON on stdin, reports progress
on stderr (the ledger keeps those lines as the task's evidence) and prints its result as one
JSON object on stdout. It honours the envelope: it works only on the bound branch, echoes the
envelope's digest, and never claims a write to main or to production. Plain Python, no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

PROTECTED = {"main", "master", "production", "prod", "trunk"}


def progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def edit_files(attempt: int, instructions: str = "", task_id: str = "") -> list[str]:
    """The work itself: the first attempt drafts the notes, a rework adds the changelog. In a
    workspace (`AIOS_WORKSPACE`, a working copy of the bound repository at its base, the
    current directory) the files are really written and committed; the worker proposes the
    commits, and only a governed write after review puts them on the branch."""
    changed = ["NOTES.md"] if attempt == 1 else ["NOTES.md", "CHANGELOG.md"]
    workspace = os.environ.get("AIOS_WORKSPACE")
    for name in changed:
        if workspace:
            with open(os.path.join(workspace, name), "a", encoding="utf-8") as out:
                out.write(f"{name}: drafted for {task_id} on attempt {attempt}\n")
        progress(f"edited {name}")
    if workspace and "rewrite history" in instructions:
        # A misbehaving agent: its work starts a history of its own instead of building on
        # the base, which is what a force push would publish. The governed write refuses it.
        subprocess.run(
            ["git", "checkout", "--quiet", "--orphan", "rewritten"], cwd=workspace, check=True
        )
        progress("rewrote the branch's history")
    if workspace:
        subprocess.run(["git", "add", "--", *changed], cwd=workspace, check=True)
        message = f"Draft {', '.join(changed)} (attempt {attempt})"
        subprocess.run(["git", "commit", "--quiet", "-m", message], cwd=workspace, check=True)
        progress("committed in the workspace")
    return changed


def governed_result(claim: dict[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
    binding = envelope["binding"]
    if binding["target_branch"].removeprefix("refs/heads/") in PROTECTED:
        raise SystemExit("refusing: the envelope targets a protected branch")
    if any(envelope["governance"].values()):
        raise SystemExit("refusing: the envelope grants more than this agent will use")
    attempt = claim["attempt"]
    progress(f"checking out {binding['repository']} at {binding['base_oid'][:12]}")
    progress(f"working on {binding['target_branch']} (attempt {attempt})")
    changed = edit_files(attempt, str(claim.get("instructions") or ""), str(claim["task_id"]))
    return {
        "task_id": claim["task_id"],
        "job_id": envelope["job_id"],
        "execution_digest": envelope["execution_digest"],
        "execution_mode": "agent_runtime",
        "status": "SUCCEEDED",
        "summary": f"drafted {', '.join(changed)} on {binding['target_branch']}",
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


def main() -> int:
    claim = json.load(sys.stdin)
    assert claim["task_id"] == os.environ["AIOS_TASK_ID"]
    delay = float(os.environ.get("EXAMPLE_AGENT_DELAY", "0"))
    progress(f"task {claim['task_id']}: {claim.get('goal') or 'no goal given'}")
    time.sleep(delay)
    envelope = claim.get("envelope")
    if envelope:
        result = governed_result(claim, envelope)
    else:
        changed = edit_files(int(claim["attempt"]))
        result = {"status": "SUCCEEDED", "summary": f"edited {', '.join(changed)}"}
    progress("done")
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
