"""The pure verifier, without a database: golden seals and heads, and property tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    EventRow,
    LedgerError,
    LogTail,
    SealRow,
    Timestamp,
    canonical_json,
    chain_of,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.log import (
    GENESIS_SEAL,
    AdoptionSealRequest,
    AdoptionState,
    ChainLink,
    ChainTips,
    EventAppend,
    LedgerHead,
    LogVerifier,
    VerificationReport,
    decide_adoption_seals,
)
from aios_ledger.core.log.legacy_seals import legacy_seal_of, legacy_seal_verifies
from aios_ledger.core.log.plan import sealed_plan
from aios_ledger.core.log.records import SEAL_VERSION_5
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.seals import seal_of, seal_of_stored
from aios_ledger.core.log.tail import AppendedEvent
from aios_ledger.core.log.verification import LegacyCheck
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

EXAMPLES = 400 if os.environ.get("AIOS_SOAK") == "1" else 60

Entry = tuple[EventRow, SealRow]


def seal_log(
    contents: Sequence[tuple[str | None, str | None, str, str, str]],
    *,
    version: int = SEAL_VERSION_5,
    ids: Sequence[int] | None = None,
    actor: str | None = None,
) -> list[Entry]:
    """The sealed log written out by hand, one chain per task, at `ids`: v5 seals over no
    state rows (what plans write for events that write none), or a 0.x `version`'s (1: what
    every log written before seal v2 held; 3: 0.x PostgreSQL's), which only `upgrade`'s
    verify knows (`LEGACY`); `actor`: the stored actor every event names (None: events written
    before events named actors)."""
    tips: dict[str, tuple[int, str]] = {}
    log: list[Entry] = []
    numbers = ids or range(1, len(contents) + 1)
    for event_id, (task, agent, kind, payload, created) in zip(numbers, contents, strict=True):
        chain = chain_of(task)
        seq, prev = tips.get(chain, (0, GENESIS_SEAL))
        event = EventRow(event_id, task, agent, kind, payload, created, actor)
        if version == SEAL_VERSION_5:
            seal = seal_of(event, seq + 1, prev)
        else:
            seal = legacy_seal_of(event, seq + 1, prev, (), version)
        tips[chain] = (seq + 1, seal)
        log.append((event, SealRow(event_id, chain, seq + 1, prev, seal, False, version)))
    return log


# How `upgrade`'s first verify checks a 0.x log's seals.
LEGACY = legacy_seal_verifies


def verify_by_lookup(
    log: Sequence[Entry],
    head: LedgerHead | None = None,
    *,
    dense_ids: bool = True,
    legacy: LegacyCheck | None = None,
) -> VerificationReport:
    """Predecessors found by (chain, chain_seq - 1), as the database query joins them."""
    links = {
        (seal.chain, seal.chain_seq): ChainLink(seal.event_id, seal.chain_seq, seal.seal)
        for _, seal in log
    }
    verifier = LogVerifier(head=head, dense_ids=dense_ids, legacy=legacy)
    for event, seal in log:
        verifier.feed(event.event_id, event, seal, links.get((seal.chain, seal.chain_seq - 1)))
    return verifier.finish(id_counter=len(log))


def verify_by_tips(log: Sequence[Entry]) -> VerificationReport:
    """Predecessors from the last seal seen per chain, as the offline export check does."""
    tips = ChainTips()
    verifier = LogVerifier()
    for event, seal in log:
        verifier.feed(event.event_id, event, seal, tips.predecessor(seal))
        tips.advance(seal)
    return verifier.finish()


SAMPLE = [
    ("task-1", None, "TASK_CREATED", '{"goal":"x"}', "2026-08-20T00:00:00Z"),
    ("task-1", "agent-a", "TASK_CLAIMED", "{}", "2026-08-20T00:00:01Z"),
    (None, None, "LEDGER_NOTE", '{"n":1}', "2026-08-20T00:00:02Z"),
    ("task-2", None, "TASK_CREATED", "{}", "2026-08-20T00:00:03Z"),
    ("task-1", "agent-a", "RESULT_SUBMITTED", '{"ok":true}', "2026-08-20T00:00:04Z"),
]


def seals_and_head(
    log: Sequence[Entry], *, dense_ids: bool = True, legacy: LegacyCheck | None = None
) -> dict[str, Any]:
    """What a golden holds of a sealed log: its seals and the head it verifies to, intact."""
    report = verify_by_lookup(log, dense_ids=dense_ids, legacy=legacy)
    assert report.intact
    return {
        "seals": [{"event_id": seal.event_id, **seal.public()} for _, seal in log],
        "head": report.head.public(),
    }


def test_golden_seal_chain_and_head(golden: SnapshotAssertion) -> None:
    """The seals 1.0 writes on both engines: over the event's content and place (not its id),
    the rows and the chained row columns (null here: no event wrote a task row)."""
    assert golden == seals_and_head(seal_log(SAMPLE))


def test_the_fast_seal_equals_the_checked_seal() -> None:
    for event, seal in seal_log(SAMPLE):
        stored = seal_of_stored(event, seal.chain_seq, seal.prev_seal)
        assert stored == seal_of(event, seal.chain_seq, seal.prev_seal) == seal.seal


def appended_by_the_core(contents: Sequence[tuple[Any, ...]]) -> list[Entry]:
    """The same log, sealed as a decision's plan seals it: onto the tail of an empty log."""
    events = [
        EventAppend(task, agent, kind, loads_object(payload), created, actor=ACTOR)
        for task, agent, kind, payload, created in contents
    ]
    tail = LogTail.read(1, [chain_of(event.task_id) for event in events], [])
    appended, _ = tail.append(events)
    return [(placed.event, placed.seal) for placed in appended]


def test_plans_seal_events_exactly_as_the_log_holds_them() -> None:
    assert appended_by_the_core(SAMPLE) == seal_log(SAMPLE, actor=ACTOR.stored())


def test_golden_v3_seal_chain_and_head(golden: SnapshotAssertion) -> None:
    """0.x PostgreSQL's seals, which `upgrade` verifies: over everything a v2 seal covers but
    the event's global id."""
    assert golden == seals_and_head(seal_log(SAMPLE, version=3), legacy=LEGACY)


def test_a_seal_does_not_cover_the_event_id_and_a_0x_v2_seal_does() -> None:
    """So a log verifies at any rising ids (gaps included), a 0.x v2 log only at its own."""
    sparse = [3, 10, 11, 40, 41]
    v5 = seal_log(SAMPLE)
    assert [seal.seal for _, seal in seal_log(SAMPLE, ids=sparse)] == [seal.seal for _, seal in v5]
    v2 = seal_log(SAMPLE, version=2)
    assert [seal.seal for _, seal in seal_log(SAMPLE, version=2, ids=sparse)] != [
        seal.seal for _, seal in v2
    ]
    moved = [
        (attrs.evolve(event, event_id=number), attrs.evolve(seal, event_id=number))
        for (event, seal), number in zip(v5, sparse, strict=True)
    ]
    assert verify_by_lookup(moved, dense_ids=False).intact
    # Where ids are dense (SQLite), a gap is still a removed event.
    assert not verify_by_lookup(moved).intact


def test_a_seal_still_covers_content_place_and_chain() -> None:
    (event, seal), *_ = seal_log(SAMPLE)
    for changed in (
        attrs.evolve(event, payload_json='{"goal":"other"}'),
        attrs.evolve(event, agent_id="mallory"),
        attrs.evolve(event, task_id="task-2"),
    ):
        assert seal_of(changed, seal.chain_seq, seal.prev_seal) != seal.seal
    assert seal_of(event, seal.chain_seq + 1, seal.prev_seal) != seal.seal
    assert seal_of(event, seal.chain_seq, seal.seal) != seal.seal


def test_a_0x_seal_has_a_known_version_and_a_v1_seal_covers_no_rows() -> None:
    event, _ = seal_log(SAMPLE)[0]
    with pytest.raises(ValueError, match=r"no 0\.x seal has version 5"):
        legacy_seal_of(event, 1, GENESIS_SEAL, (), 5)
    image = RowImage("tasks", "task-1", GENESIS_SEAL)
    with pytest.raises(ValueError, match="a v1 seal covers no rows"):
        legacy_seal_of(event, 1, GENESIS_SEAL, (image,), 1)


def test_only_upgrade_verifies_a_0x_log() -> None:
    """1.0's verifier knows v5 seals alone: a 0.x log's seals are malformed to it, and verify
    under `upgrade`'s legacy check."""
    for version in (1, 2, 3):
        log = seal_log(SAMPLE, version=version)
        assert verify_by_lookup(log, legacy=LEGACY).intact
        found = verify_by_lookup(log)
        assert set(found.finding_counts) == {"FORGED_EVENT"}


def test_the_core_seals_v5_so_the_store_may_number_events_after_the_decision() -> None:
    events = [
        EventAppend(task, agent, kind, loads_object(payload), created, actor=ACTOR)
        for task, agent, kind, payload, created in SAMPLE
    ]
    chains = [chain_of(event.task_id) for event in events]
    tail = LogTail.read(1, chains, [])
    plan = sealed_plan((), events, None, tail=tail)
    assert [(placed.event, placed.seal) for placed in plan.events] == seal_log(
        SAMPLE, actor=ACTOR.stored()
    )
    sparse = [7, 9, 12, 13, 20]
    numbered = plan.numbered(sparse)
    assert [placed.event.event_id for placed in numbered.events] == sparse
    assert [placed.seal.event_id for placed in numbered.events] == sparse
    assert [placed.seal.seal for placed in numbered.events] == [
        placed.seal.seal for placed in plan.events
    ]
    assert numbered.statements()[0].params["event_id"] == 7
    with pytest.raises(ValueError, match="5 events, 4 ids"):
        plan.numbered(sparse[:4])
    first = plan.events[0]
    v2 = AppendedEvent(first.event, attrs.evolve(first.seal, seal_version=2))
    with pytest.raises(ValueError, match="covers its event's id"):
        v2.numbered(9)


def test_golden_adoption_plan(golden: SnapshotAssertion) -> None:
    """The older runtime's events, sealed where they stand (v5 over no rows), each marked as
    sealed at adoption."""
    log = seal_log(SAMPLE)
    unsealed = [event for event, _ in log]
    tail = LogTail.read(len(log) + 1, [chain_of(event.task_id) for event in unsealed], [])
    state = AdoptionState(unsealed=tuple(unsealed), tail=tail)
    plan = decide_adoption_seals(state, AdoptionSealRequest(), now=Timestamp.from_epoch_ms(0))
    assert [write.params["seal"] for write in plan.writes] == [seal.seal for _, seal in log]
    assert {write.params["sealed_at_adoption"] for write in plan.writes} == {1}
    assert {write.params["seal_version"] for write in plan.writes} == {5}
    assert plan.events == ()
    assert golden == attrs.asdict(plan)


def test_events_must_come_in_increasing_id() -> None:
    log = seal_log(SAMPLE)
    verifier = LogVerifier()
    verifier.feed(2, *log[1], None)
    with pytest.raises(LedgerError, match="VERIFY_ORDER_INVALID"):
        verifier.feed(2, *log[1], None)


def test_a_head_parses_strictly() -> None:
    head = verify_by_lookup(seal_log(SAMPLE)).head
    assert LedgerHead.from_mapping(head.public()) == head
    for bad in (
        {**head.public(), "extra": 1},
        {**head.public(), "events": True},
        {**head.public(), "digest": "sha256:x"},
        {**head.public(), "schema": "other"},
        {"events": 0, "last_event_id": 3, "digest": head.digest},
        "head",
    ):
        with pytest.raises(LedgerError, match="HEAD_INVALID"):
            LedgerHead.from_mapping(bad)


def test_removing_newest_events_is_found_only_with_a_head() -> None:
    log = seal_log(SAMPLE)
    head = verify_by_lookup(log).head
    cut = log[:3]
    assert verify_by_tips(cut).intact  # without a head (or the id counter) nothing tells
    links = {(s.chain, s.chain_seq): ChainLink(s.event_id, s.chain_seq, s.seal) for _, s in cut}
    verifier = LogVerifier(head=head)
    for event, seal in cut:
        verifier.feed(event.event_id, event, seal, links.get((seal.chain, seal.chain_seq - 1)))
    report = verifier.finish()
    assert [(f.code, f.event_id) for f in report.findings] == [
        ("EVENT_REMOVED", 4),
        ("EVENT_REMOVED", 5),
    ]


texts = st.text(st.characters(codec="utf-8"), max_size=12)
contents = st.tuples(
    st.sampled_from(["task-1", "task-2", "task-3", None]),
    st.one_of(st.none(), st.sampled_from(["agent-a", "agent-b"])),
    st.sampled_from(["TASK_CREATED", "TASK_CLAIMED", "TASK_HEARTBEAT"]),
    st.dictionaries(
        texts, st.one_of(st.integers(-(10**20), 10**20), texts, st.booleans()), max_size=3
    ).map(canonical_json),
    st.sampled_from(["2026-08-20T00:00:00Z", "2026-08-20T00:00:01Z"]),
)
logs = st.lists(contents, min_size=1, max_size=25)


@settings(max_examples=EXAMPLES, deadline=None)
@given(logs)
def test_random_logs_verify_intact(sequence: list[Any]) -> None:
    log = seal_log(sequence)
    assert appended_by_the_core(sequence) == seal_log(sequence, actor=ACTOR.stored())
    by_lookup, by_tips = verify_by_lookup(log), verify_by_tips(log)
    assert by_lookup.intact, by_lookup.findings
    assert by_tips.intact, by_tips.findings
    assert by_lookup.head == by_tips.head
    assert verify_by_lookup(log, head=by_lookup.head).intact


EVENT_FIELDS = ("task_id", "agent_id", "event_type", "payload_json", "created_at")
SEAL_FIELDS = ("chain_seq", "prev_seal", "seal")


@settings(max_examples=EXAMPLES, deadline=None)
@given(logs, st.data())
def test_any_single_field_mutation_is_found_at_its_event(sequence: list[Any], data: Any) -> None:
    log = seal_log(sequence)
    index = data.draw(st.integers(0, len(log) - 1), label="index")
    field = data.draw(st.sampled_from(EVENT_FIELDS + SEAL_FIELDS), label="field")
    event, seal = log[index]
    if field in EVENT_FIELDS:
        old = getattr(event, field)
        new = data.draw(
            st.one_of(st.none(), texts, st.integers()).filter(lambda v: v != old), label="value"
        )
        log[index] = (attrs.evolve(event, **{field: new}), seal)
    else:
        old = getattr(seal, field)
        if field == "chain_seq":
            new = data.draw(st.integers(1, 30).filter(lambda v: v != old), label="value")
        else:
            new = data.draw(
                st.one_of(st.just(GENESIS_SEAL), texts).filter(lambda v: v != old),
                label="value",
            )
        log[index] = (event, attrs.evolve(seal, **{field: new}))
    for report in (verify_by_lookup(log), verify_by_tips(log)):
        assert not report.intact
        assert event.event_id in {finding.event_id for finding in report.findings}


optional_texts = st.one_of(st.none(), texts)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    optional_texts,
    optional_texts,
    texts,
    texts,
    texts,
    st.integers(1, 2**62),
    st.integers(1, 2**62),
    texts,
)
def test_the_fast_seal_equals_the_checked_seal_for_any_text(
    task: str | None,
    agent: str | None,
    kind: str,
    payload: str,
    created: str,
    event_id: int,
    chain_seq: int,
    prev: str,
) -> None:
    event = EventRow(event_id, task, agent, kind, payload, created)
    assert seal_of_stored(event, chain_seq, prev) == seal_of(event, chain_seq, prev)


def test_a_seal_covers_the_events_actor_and_an_older_event_keeps_its_seal() -> None:
    """An event that names its actor is sealed over it: another actor is another seal, the
    fast and the checked seal agree; an event that names none (written before events named
    actors) seals exactly as it was sealed before, so an older log verifies as it stands."""
    (event, seal), *_ = seal_log(SAMPLE)
    assert event.actor is None
    named = attrs.evolve(event, actor=ACTOR.stored())
    other = attrs.evolve(event, actor=Actor("mallory", "http", ("owner",)).stored())
    sealed = {seal_of(candidate, 1, seal.prev_seal) for candidate in (event, named, other)}
    assert len(sealed) == 3
    for candidate in (event, named, other):
        assert seal_of_stored(candidate, 1, seal.prev_seal) == seal_of(candidate, 1, seal.prev_seal)
    assert seal_of(event, 1, seal.prev_seal) == seal.seal
    for version in (1, 2, 3, 4):
        assert legacy_seal_of(named, 1, seal.prev_seal, (), version) != legacy_seal_of(
            event, 1, seal.prev_seal, (), version
        )
