#!/usr/bin/env python3
"""An example reviewer for `aios-ledger review --exec 'python3 examples/reviewer.py'`.

It reads `{instruction, evidence, result}` on stdin and prints `{decision, reason}`. Like a
careful human reviewer it asks for rework once — the first attempt must also update the
changelog — and accepts a later attempt whose evidence shows the work. Plain Python, no network.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def decide(review: dict[str, Any]) -> dict[str, str]:
    evidence = review["evidence"]
    attempt = int(str(evidence["target"]["run_id"]).rsplit("@", 1)[-1])
    lines = [
        str(event.get("payload", {}).get("line", ""))
        for event in evidence.get("events", [])
        if event.get("kind") == "stderr"
    ]
    result = review.get("result") or {}
    if result.get("status") != "SUCCEEDED":
        return {"decision": "NEEDS_REWORK", "reason": "the attempt did not succeed; try again"}
    if attempt == 1:
        return {"decision": "NEEDS_REWORK", "reason": "also record the change in CHANGELOG.md"}
    if not any("CHANGELOG.md" in line for line in lines):
        return {"decision": "NEEDS_REWORK", "reason": "the evidence shows no changelog entry"}
    return {"decision": "SUCCEEDED", "reason": f"criteria met on attempt {attempt}"}


if __name__ == "__main__":
    json.dump(decide(json.load(sys.stdin)), sys.stdout)
