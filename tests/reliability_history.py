"""The history checker of the contention test, in the manner of Jepsen's set and lock checkers.

Input: the clients' histories (invoke and completion records with wall-clock times) and the
file's contents after the run. Every event in the file is the effect of one operation; every
operation a client was told succeeded (`ok`, not a replay) names its effect by (task, revision).
So, per task, Jepsen's classes are:

- lost: acknowledged, but its effect is not in the file (no event of that kind at that
  revision, no idempotency row for its key, or one that answers otherwise);
- duplicated: applied twice (a replay that did not give back the recorded answer, two
  acknowledgements naming one effect, a key named by two events);
- unexpected: in the file, but never acknowledged (a task, key or event no client was told of;
  a refused operation whose key is there).

Leases ("no two holders ever had a valid lease on one task at once") are checked twice:
- from the file: each claim's lease runs from its event's time to the end its last heartbeat
  set, cut short by a release (submit, expiry, cancel); the next claim of the task must not
  start before that end, and every heartbeat or submit of a holder was applied before its
  lease's end;
- from the history: holder k's lease runs from the client's acknowledgement of its claim to
  the lease end recorded in the file (`lease_expires_at` of its last heartbeat, exact: a lease
  is valid while the whole-second server time is before it, so a re-claim's real time is at
  or after it), or to the invocation of its submit when it released the task itself; the next
  holder's acknowledgement must not come before that. And every heartbeat or submit a client
  was told succeeded with the token of claim k was applied between claim k and claim k+1.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
from aios_ledger.core import Timestamp
from reliability_checks import (
    EVENT_OF_EXPIRE,
    EVENT_OF_HEARTBEAT,
    EVENT_OF_OPERATION,
    Event,
    LedgerContents,
    response_core,
)

RELEASES = ("RESULT_SUBMITTED", "TASK_LEASE_EXPIRED", "TASK_CANCELLED")
STALE_CODES = ("LEASE_EXPIRED", "LEASE_INVALID")


@attrs.frozen
class Operation:
    process: int
    serial: int
    op: str
    args: dict[str, Any]
    invoked: float
    kind: str  # ok | fail | info (no completion)
    completed: float | None
    value: Any
    code: str | None


def read_histories(paths: Iterable[Path]) -> list[Operation]:
    operations = []
    for path in paths:
        invokes: dict[int, dict[str, Any]] = {}
        completions: dict[int, dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            (invokes if record["kind"] == "invoke" else completions)[record["n"]] = record
        for serial, invoke in sorted(invokes.items()):
            done = completions.get(serial)
            operations.append(
                Operation(
                    process=invoke["p"],
                    serial=serial,
                    op=invoke["op"],
                    args=invoke["args"],
                    invoked=invoke["t"],
                    kind="info" if done is None else done["kind"],
                    completed=None if done is None else done["t"],
                    value=None if done is None else done.get("value"),
                    code=None if done is None else done.get("code"),
                )
            )
    return operations


def epoch(moment: str) -> float:
    return Timestamp.parse(moment).epoch_ms / 1000


def _effects(operation: Operation) -> list[tuple[str, int, str]]:
    """(task, revision, event type) of what an acknowledged recorded answer says it did."""
    value = operation.value
    if operation.kind != "ok" or value is None or operation.args.get("replay"):
        return []
    if operation.op == "expire":
        return [(item["task_id"], item["revision"], EVENT_OF_EXPIRE) for item in value["expired"]]
    kind = EVENT_OF_OPERATION.get(operation.op, EVENT_OF_HEARTBEAT)
    return [(value["task_id"], value["revision"], kind)]


def check_history(contents: LedgerContents, operations: list[Operation]) -> dict[str, Any]:
    """The anomalies by class (each a list of text) and the run's figures."""
    lost: list[str] = []
    duplicated: list[str] = []
    unexpected: list[str] = []
    overlaps: list[str] = []

    # -- every effect in the file against every acknowledgement ------------------------------
    acknowledged: dict[tuple[str, int], list[Operation]] = defaultdict(list)
    for operation in operations:
        for task_id, revision, event_type in _effects(operation):
            events = contents.events.get(task_id, [])
            if not 1 <= revision <= len(events) or events[revision - 1].event_type != event_type:
                lost.append(f"{operation.op} of {task_id} acknowledged at revision {revision}")
            acknowledged[(task_id, revision)].append(operation)
    for (task_id, revision), ops in acknowledged.items():
        if len(ops) > 1:
            duplicated.append(f"{task_id} revision {revision} acknowledged {len(ops)} times")
    # A claim takes over passed leases before it claims, and answers only for its own claim:
    # an expiry no answer names is such a takeover (that it came after the lease ended is the
    # lease-overlap check's). Any other event nobody answered for is unexpected.
    # An operation whose outcome the client could not know (`info`: the server went away
    # during its commit) may be in the file without an answer: once per such operation, an
    # event of its kind on its task (unkeyed heartbeats; keyed operations were asked again and
    # answered as replays).
    indeterminate = Counter(
        (o.args.get("task_id"), EVENT_OF_OPERATION.get(o.op, EVENT_OF_HEARTBEAT))
        for o in operations
        if o.kind == "info" and o.op == "heartbeat"
    )
    takeovers = applied_indeterminate = 0
    for task_id, events in contents.events.items():
        for revision, event in enumerate(events, 1):
            if (task_id, revision) in acknowledged:
                continue
            if event.event_type == EVENT_OF_EXPIRE:
                takeovers += 1
                continue
            if indeterminate[(task_id, event.event_type)] > 0:
                indeterminate[(task_id, event.event_type)] -= 1
                applied_indeterminate += 1
                continue
            unexpected.append(f"{task_id} {event.event_type} at {revision}: never answered")

    # -- keys: recorded answers kept, replays give them back, refusals leave nothing ----------
    first: dict[str, Operation] = {}
    invoked_keys: set[str] = set()
    for operation in operations:
        key = operation.args.get("key")
        if key is None:
            continue
        invoked_keys.add(key)
        if (
            operation.kind == "ok"
            and operation.value is not None
            and not operation.args.get("replay")
        ):
            first[key] = operation
    for operation in operations:
        key = operation.args.get("key")
        if key is None:
            continue
        row = contents.keys.get(key)
        if operation.kind == "fail" and not operation.args.get("replay") and row is not None:
            unexpected.append(f"refused {operation.op} {key} ({operation.code}) is in the file")
        if operation.kind != "ok" or operation.value is None:
            continue  # a claim that found nothing records nothing
        if row is None:
            lost.append(f"{operation.op} {key} acknowledged, no idempotency row")
            continue
        if operation.value is not None and response_core(row["response"]) != response_core(
            operation.value
        ):
            lost.append(f"{operation.op} {key}: the file answers otherwise than the client was")
        if operation.args.get("replay"):
            original = first.get(key)
            if operation.value is None or operation.value.get("idempotent") is not True:
                duplicated.append(f"replay of {operation.op} {key} was applied again")
            elif original is not None and response_core(original.value) != response_core(
                operation.value
            ):
                duplicated.append(f"replay of {operation.op} {key} answered otherwise")
    for key in set(contents.keys) - invoked_keys:
        unexpected.append(f"key {key} was never used")
    named = Counter(
        e.payload["idempotency_key"]
        for events in contents.events.values()
        for e in events
        if "idempotency_key" in e.payload
    )
    duplicated.extend(f"key {key} names {n} events" for key, n in named.items() if n > 1)

    # -- tasks: created as asked, none from nowhere ----------------------------------------
    requested = {o.args["task"]["task_id"] for o in operations if o.op == "create"}
    unexpected.extend(f"task {t} was never requested" for t in set(contents.tasks) - requested)
    for operation in operations:
        created = operation.args["task"]["task_id"] if operation.op == "create" else None
        if operation.kind == "ok" and created is not None and created not in contents.tasks:
            lost.append(f"task {operation.args['task']['task_id']} acknowledged, missing")

    # -- leases ------------------------------------------------------------------------------
    stale_refusals = sum(
        1 for o in operations if o.op in ("heartbeat", "submit") and o.code in STALE_CODES
    )
    reclaims = 0
    holder_writes: dict[str, list[Operation]] = defaultdict(list)
    for operation in operations:
        holder = operation.op in ("heartbeat", "submit") and operation.kind == "ok"
        if holder and not operation.args.get("replay"):
            holder_writes[operation.value["task_id"]].append(operation)
    for task_id, events in contents.events.items():
        tenures = _tenures(events)
        reclaims += max(0, len(tenures) - 1)
        for tenure in tenures:
            for event in tenure["holder_writes"]:
                if epoch(event.created_at) >= tenure["lease_end_at_write"][event.event_id]:
                    overlaps.append(f"{task_id}: {event.event_type} after its lease's end")
        for before, after in itertools.pairwise(tenures):
            if epoch(after["claim"].created_at) < before["end"]:
                overlaps.append(
                    f"{task_id}: claimed at {after['claim'].created_at} while the "
                    f"lease of revision {before['index']} ran"
                )
            previous = acknowledged.get((task_id, before["index"]), [])
            following = acknowledged.get((task_id, after["index"]), [])
            if not previous or not following:
                continue  # reported as lost or unexpected above
            end = before["lease_end"]
            release = before["release"]
            if release is not None and release[1].event_type == "RESULT_SUBMITTED":
                submits = acknowledged.get((task_id, release[0]), [])
                if submits:
                    end = min(end, submits[0].invoked)
            acked = following[0].completed
            assert acked is not None
            if acked < end:
                overlaps.append(
                    f"{task_id}: claim acknowledged at {acked:.3f} while the previous holder's "
                    f"lease ran to {end:.3f}"
                )
        # Every write a client was told it made with a token fell within that token's tenure.
        starts = [tenure["index"] for tenure in tenures] + [len(events) + 1]
        claim_key_at = {
            tenure["index"]: acknowledged[(task_id, tenure["index"])][0].args.get("key")
            for tenure in tenures
            if acknowledged.get((task_id, tenure["index"]))
        }
        for operation in holder_writes.get(task_id, []):
            revision = operation.value["revision"]
            tenure_start = max(s for s in starts if s < revision)
            if claim_key_at.get(tenure_start) != operation.args["claim_key"]:
                overlaps.append(
                    f"{task_id}: {operation.op} with the token of {operation.args['claim_key']}"
                    f" applied at revision {revision}, in another holder's tenure"
                )

    counts = Counter((o.op, o.kind) for o in operations)
    return {
        "lost": lost,
        "duplicated": duplicated,
        "unexpected": unexpected,
        "lease_overlaps": overlaps,
        "figures": {
            "processes": len({o.process for o in operations}),
            "operations": len(operations),
            "acknowledged": sum(1 for o in operations if o.kind == "ok"),
            "refused": sum(1 for o in operations if o.kind == "fail"),
            "indeterminate": sum(1 for o in operations if o.kind == "info"),
            "indeterminate_applied": applied_indeterminate,
            "replays": sum(1 for o in operations if o.args.get("replay")),
            "claims": counts[("claim", "ok")],
            "reclaims_of_one_task": reclaims,
            "leases_taken_over_by_claims": takeovers,
            "stale_holder_refusals": stale_refusals,
            "tasks": len(contents.tasks),
            "events": sum(len(events) for events in contents.events.values()),
        },
    }


def _tenures(events: list[Event]) -> list[dict[str, Any]]:
    """Each claim of a task: its index, its lease's end (moved by heartbeats, cut by a
    release), the holder's writes with the lease end in force when each was applied."""
    tenures: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for index, event in enumerate(events, 1):
        if event.event_type == "TASK_CLAIMED":
            current = {
                "index": index,
                "claim": event,
                "lease_end": epoch(event.payload["lease_expires_at"]),
                "release": None,
                "holder_writes": [],
                "lease_end_at_write": {},
            }
            tenures.append(current)
        elif current is not None and current["release"] is None:
            if event.event_type in (EVENT_OF_HEARTBEAT, "RESULT_SUBMITTED"):
                current["holder_writes"].append(event)
                current["lease_end_at_write"][event.event_id] = current["lease_end"]
            if event.event_type == EVENT_OF_HEARTBEAT:
                current["lease_end"] = epoch(event.payload["lease_expires_at"])
            if event.event_type in RELEASES:
                current["release"] = (index, event)
    for tenure in tenures:
        release = tenure["release"]
        end = tenure["lease_end"]
        if release is not None:
            end = min(end, epoch(release[1].created_at))
        tenure["end"] = end
    return tenures
