"""The pull request after a governed write, for a repository whose settings name a forge: the
forge is asked for an open request from the write's branch into the base, and only then to open
one; what it answered is sealed (`core.git.pull_requests`).
"""

from __future__ import annotations

import attrs
from aios_ledger.core import LedgerError, TaskRow, chain_of
from aios_ledger.core.git import GovernedWriteRow, RepositoryRow, WriteAnswer
from aios_ledger.core.git.decisions import APPLIED
from aios_ledger.core.git.forges import (
    AUTH_REFUSED,
    PullRequestSetting,
    PullRequestText,
    pull_request_text,
    route_pull_request,
)
from aios_ledger.core.git.policy import HEADS
from aios_ledger.core.git.pull_requests import (
    ForgeAnswer,
    PullRequestState,
    decide_pull_request,
    opened_answer,
    recorded_pull_request,
)
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.attest.commits import attestation_row
from aios_ledger.shell.attest.facts import commit_facts, task_events
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_record
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.forges import ForgeClient, ForgeFailure, Opened
from aios_ledger.shell.git.remotes import Credentials, read_token, remote_of
from aios_ledger.shell.git.repos import require_repository


@attrs.frozen
class _Asked:
    """What the request needs, read in one transaction."""

    write: GovernedWriteRow
    setting: PullRequestSetting
    repository: RepositoryRow
    recorded: JsonObject | None
    text: PullRequestText


def _asked(conn: Connection, key: str) -> _Asked | None:
    write = fetch_record(conn, "get_governed_write", {"idempotency_key": key}, GovernedWriteRow)
    if write is None or write.state != APPLIED:
        return None
    repository = require_repository(conn, write.repository)
    setting = repository.settings().pull_request()
    if setting is None:
        return None
    task = fetch_record(conn, "get_task", {"task_id": write.task_id}, TaskRow)
    assert task is not None  # a write's task is never gone while its write row stands
    facts = commit_facts(conn, write)
    attested = attestation_row(conn, key)
    text = pull_request_text(
        goal=task.goal,
        task_id=write.task_id,
        attempt=facts.attempt,
        agent=facts.agent_id,
        reviewer=facts.reviewer,
        verdict=facts.decision,
        attestation_sha256=None if attested is None else attested.provenance_sha256,
        idempotency_key=key,
    )
    recorded = recorded_pull_request(task_events(conn, write.task_id), key)
    return _Asked(write, setting, repository, recorded, text)


def propose_write(
    db: Database, answer: WriteAnswer, *, clock: Clock = system_clock
) -> JsonObject | None:
    """The pull request of a landed write (None: its repository opens none), as recorded."""
    key = answer["idempotency_key"]
    asked = db.read(lambda conn: _asked(conn, key))
    if asked is None:
        return None
    already = opened_answer(asked.recorded)
    if already is not None:  # before the forge is asked
        return already
    try:
        remote, unreadable = remote_of(asked.repository.path), None
    except LedgerError as refused:
        remote, unreadable = None, str(refused)
    route = route_pull_request(
        asked.setting,
        head_branch=asked.repository.head_branch,
        remote_scheme=None if remote is None else remote.scheme,
        remote_token_file=None if remote is None else remote.credentials.token_file,
        remote_unreadable=unreadable,
    )
    head = asked.write.ref.removeprefix(HEADS)
    found: dict[str, object] = {
        "idempotency_key": key,
        "forge": asked.setting.forge,
        "project": asked.setting.project,
        "head": head,
        "base": route.base or "-",
    }
    try:
        if route.refusal is not None:
            raise ForgeFailure(route.refusal[0], None, route.refusal[1])
        assert route.base is not None and route.token_file is not None
        try:
            token = read_token(Credentials(token_file=route.token_file))
        except LedgerError as refused:
            raise ForgeFailure(AUTH_REFUSED, None, str(refused)) from None
        ca_bundle = None if remote is None else remote.credentials.ca_bundle
        client = ForgeClient(asked.setting, token, ca_bundle)
        opened: Opened = client.open_or_find(head, route.base, asked.text)
        found.update(url=opened.url, number=opened.number, adopted=opened.adopted)
    except ForgeFailure as failed:
        found.update(code=failed.code, status=failed.status, message=failed.message or "-")
    forge_answer = ForgeAnswer.from_mapping(found)
    actor = current_actor()

    def record(conn: Connection) -> JsonObject:
        plans = PlanExecutor(conn)
        write = fetch_record(conn, "get_governed_write", {"idempotency_key": key}, GovernedWriteRow)
        state = PullRequestState(
            write=write,
            recorded=recorded_pull_request(task_events(conn, asked.write.task_id), key),
            tail=plans.tail(chain_of(asked.write.task_id)),
        )
        decision = decide_pull_request(state, forge_answer, now=read_clock(clock), actor=actor)
        return plans.apply(decision)

    return db.write(record)
