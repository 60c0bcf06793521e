"""Scoring rules and the pure merge (docs/decisions/0006), with exact numbers.

| scenario                  | tests here                                                      |
|---------------------------|-----------------------------------------------------------------|
| initial scores            | test_initial_scores, test_new_candidates_get_initial_scores     |
| reinforcement             | test_reinforcement_sequence_*                                   |
| convergence, never > 1    | test_hundred_reinforcements_*, test_reinforce_never_exceeds_one |
| 7-day grace               | test_grace_period_*                                             |
| decay beyond 7 days       | test_decay_beyond_grace_is_099_per_day                          |
| archive threshold         | test_archive_threshold                                          |
| forget threshold          | test_forget_threshold                                           |
| mixed scenario            | test_mixed_scenario                                             |
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import (
    ArchiveReason,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
    sort_entries,
)
from memory_core.base.merge_values import (
    Candidate,
    Change,
    ChangeKind,
    Kept,
    MergeResult,
    Outcome,
    build_change,
)
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm import matching
from memory_core.longterm import merge as merge_module
from memory_core.longterm.decay import decay_all
from memory_core.longterm.fact_keys import Relation, relation, skeleton
from memory_core.longterm.matching import SKELETON_MAX, normalize_content, same_memory
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import (
    Status,
    contradict,
    days_until_below,
    decayed_score,
    expire,
    initial_score,
    is_expired,
    projection,
    reinforce,
    score_at,
    status_of,
)
from tests.support import add_candidates, believed

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
FLAT = ScoringPolicy(decay="flat")
"""The flat 0.99 a day, which these lifecycle tests were written against."""


def days(n: float) -> timedelta:
    return timedelta(days=n)


def entry(
    entry_id: str = "e1",
    score: float = 0.6,
    *,
    at: datetime = T0,
    content: str | None = None,
    category: str = "fact",
    **kw: object,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=content or f"memory number {entry_id}",
        category=category,
        score=score,
        created_at=at,
        last_activated=at,
        scored_at=at,
        **kw,  # type: ignore[arg-type]
    )


def only(result_entries: list[MemoryEntry], entry_id: str = "e1") -> MemoryEntry:
    found = [e for e in result_entries if e.id == entry_id]
    assert len(found) == 1, f"{entry_id} not in result"
    return found[0]


# --- new memories ------------------------------------------------------------------------


def test_initial_scores() -> None:
    assert initial_score(Importance.HIGH) == 0.8
    assert initial_score(Importance.MEDIUM) == 0.6
    assert initial_score(Importance.LOW) == 0.4
    assert initial_score("high") == 0.8


def test_new_candidates_get_initial_scores() -> None:
    cands = [
        Candidate("用户偏好用 pytest 而非 unittest", "preference", Importance.MEDIUM),
        Candidate("用户提到下周三有产品评审会议", "todo", Importance.HIGH),
        Candidate("the user once tried Vue", "fact", Importance.LOW),
    ]
    result = merge([], cands, T0, "s1")
    scores = {e.content: e.score for e in result.entries}
    assert scores == {
        "用户偏好用 pytest 而非 unittest": 0.6,
        "用户提到下周三有产品评审会议": 0.8,
        "the user once tried Vue": 0.4,
    }
    assert result.count(ChangeKind.ADDED) == 3
    assert result.stats == {"add": 3}
    for e in result.entries:
        assert e.hits == 0
        assert e.created_at == e.last_activated == e.scored_at == T0
        assert e.source_session == "s1"
        assert e.sessions == ("s1",)
    assert len({e.id for e in result.entries}) == 3
    # Best first.
    assert [e.score for e in result.entries] == [0.8, 0.6, 0.4]


def test_blank_candidate_is_ignored() -> None:
    result = merge([], [Candidate("   ")], T0, None)
    assert result.entries == []
    assert result.changes == []


# --- reinforcement -----------------------------------------------------------------------


def test_reinforcement_sequence_pure() -> None:
    assert reinforce(0.6) == pytest.approx(0.68)
    assert reinforce(reinforce(0.6)) == pytest.approx(0.744)


def test_reinforcement_sequence_through_merge() -> None:
    existing = [entry("e1", 0.6)]
    t1 = T0 + days(1)
    first = merge(existing, [Candidate("memory number e1")], t1, "s1")
    e1 = only(first.entries)
    assert e1.score == pytest.approx(0.68)
    assert e1.hits == 1
    assert e1.last_activated == t1
    assert e1.scored_at == t1
    assert e1.created_at == T0
    assert e1.sessions == ("s1",)
    assert first.count(ChangeKind.REINFORCED) == 1
    assert first.count(ChangeKind.ADDED) == 0
    change = next(c for c in first.changes if c.kind is ChangeKind.REINFORCED)
    assert change.old_score == 0.6
    assert change.new_score == pytest.approx(0.68)

    t2 = T0 + days(2)
    second = merge(first.entries, [Candidate("Memory   number E1!")], t2, "s2")
    e1 = only(second.entries)
    assert e1.score == pytest.approx(0.744)
    assert e1.hits == 2
    assert e1.last_activated == t2
    assert e1.sessions == ("s1", "s2")


def test_reinforcement_by_explicit_match_id() -> None:
    existing = [entry("e1", 0.6, content="用户喜欢简洁的代码风格")]
    result = merge(existing, [Candidate("completely different words", matches="e1")], T0, "s")
    assert len(result.entries) == 1
    assert only(result.entries).score == pytest.approx(0.68)


def test_hundred_reinforcements_stay_below_one() -> None:
    score = 0.6
    for _ in range(100):
        new = reinforce(score)
        assert score < new < 1.0
        score = new
    assert score == pytest.approx(1.0, abs=1e-8)

    entries = [entry("e1", 0.6)]
    for n in range(100):
        entries = merge(entries, [Candidate("memory number e1")], T0, f"s{n}").entries
    e1 = only(entries)
    assert e1.hits == 100
    assert e1.score < 1.0
    assert len(e1.sessions) == 8  # only recent sessions are remembered


@given(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=1, max_value=500))
def test_reinforce_never_exceeds_one(start: float, times: int) -> None:
    score = start
    for _ in range(times):
        new = reinforce(score)
        assert score <= new <= 1.0
        score = new


# --- decay -------------------------------------------------------------------------------


@pytest.mark.parametrize("elapsed", [days(0), days(1), days(6.9), days(7), days(7.99)])
def test_grace_period_no_change(elapsed: timedelta) -> None:
    existing = [entry("e1", 0.6)]
    result = merge(existing, [], T0 + elapsed, None)
    assert only(result.entries) == existing[0]
    assert result.changes == []
    assert score_at(existing[0], T0 + elapsed) == 0.6


@pytest.mark.parametrize("n", [8, 9, 10, 37, 100])
def test_flat_decay_beyond_grace_is_099_per_day(n: int) -> None:
    existing = [entry("e1", 0.6)]
    now = T0 + days(n)
    result = merge(existing, [], now, None, FLAT)
    e1 = only(result.entries)
    assert e1.score == pytest.approx(0.6 * 0.99 ** (n - 7), rel=1e-12)
    assert e1.scored_at == now
    assert e1.last_activated == T0  # decay is not an activation
    assert e1.hits == 0
    assert result.count(ChangeKind.DECAYED) == 1
    change = result.changes[0]
    assert change.old_score == 0.6
    assert change.new_score == pytest.approx(0.6 * 0.99 ** (n - 7), rel=1e-12)


def test_flat_decay_37_days_exact() -> None:
    assert score_at(entry("e1", 0.6), T0 + days(37), FLAT) == pytest.approx(
        0.6 * 0.99**30, rel=1e-12
    )


def test_partial_days_do_not_count() -> None:
    e = entry("e1", 0.6)
    assert score_at(e, T0 + days(8) - timedelta(seconds=1)) == 0.6
    assert score_at(e, T0 + days(8)) == pytest.approx(0.6 * math.exp(-0.008))


def test_decaying_twice_at_the_same_instant_equals_once() -> None:
    existing = [entry("e1", 0.6)]
    now = T0 + days(50)
    once = merge(existing, [], now, None)
    twice = merge(once.entries, [], now, None)
    assert twice.entries == once.entries
    assert twice.changes == []


def test_stepwise_decay_equals_direct() -> None:
    existing = [entry("e1", 0.6), entry("e2", 0.9, category="todo")]
    policy = ScoringPolicy(decay="flat", category_decay={"todo": 0.95})
    step1 = merge(existing, [], T0 + days(10), None, policy)
    step2 = merge(step1.entries, [], T0 + days(40), None, policy)
    direct = merge(existing, [], T0 + days(40), None, policy)
    for entry_id in ("e1", "e2"):
        a, b = only(step2.entries, entry_id), only(direct.entries, entry_id)
        assert a.score == pytest.approx(b.score, rel=1e-12)
        assert a.scored_at == b.scored_at
    assert only(direct.entries, "e1").score == pytest.approx(0.6 * 0.99**33, rel=1e-12)
    assert only(direct.entries, "e2").score == pytest.approx(0.9 * 0.95**33, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=6),
    st.floats(min_value=0.05, max_value=1.0),
)
def test_stepwise_decay_property(steps: list[int], score: float) -> None:
    existing = [entry("e1", score)]
    current = existing
    for offset in sorted(steps):
        current = merge(current, [], T0 + days(offset), None).entries
    direct = merge(existing, [], T0 + days(max(steps)), None).entries
    if not direct:
        assert current == [], "forgotten directly but not step-wise"
        return
    assert current, "forgotten step-wise but not directly"
    assert only(current).score == pytest.approx(only(direct).score, rel=1e-9)


def test_decayed_score_counts_only_new_days() -> None:
    last = T0
    scored = T0 + days(20)  # 13 days already applied to the stored score
    assert decayed_score(0.5, scored, last, T0 + days(20), 0.99, 7) == 0.5
    assert decayed_score(0.5, scored, last, T0 + days(30), 0.99, 7) == pytest.approx(0.5 * 0.99**10)


def test_archive_threshold_in_flat_mode() -> None:
    existing = [entry("e1", 0.6)]
    # 0.6 * 0.99**109 = 0.2009 stays Active; 0.6 * 0.99**110 = 0.1989 is archived.
    assert 0.6 * 0.99**109 >= 0.2 > 0.6 * 0.99**110
    kept = merge(existing, [], T0 + days(116), None, FLAT)
    assert status_of(only(kept.entries)) is Status.ACTIVE
    assert kept.count(ChangeKind.ARCHIVED) == 0

    moved = merge(existing, [], T0 + days(117), None, FLAT)
    e1 = only(moved.entries)
    assert e1.score == pytest.approx(0.6 * 0.99**110)
    assert status_of(e1) is Status.ARCHIVED
    assert e1.archived is None  # by score, not by flag
    archived = [c for c in moved.changes if c.kind is ChangeKind.ARCHIVED]
    assert len(archived) == 1
    assert archived[0].detail == "score below archive line"
    text = render_memory(moved.entries, now=T0)
    assert text.index("## Archived Memories") < text.index("### [e1]")

    # Already archived: no second archive change.
    again = merge(moved.entries, [], T0 + days(130), None, FLAT)
    assert again.count(ChangeKind.ARCHIVED) == 0


def test_forget_threshold_in_flat_mode() -> None:
    existing = [entry("e1", 0.6, content="用户曾尝试用 Vue 写前端"), entry("e2", 0.9)]
    assert 0.6 * 0.99**247 >= 0.05 > 0.6 * 0.99**248
    kept = merge(existing, [], T0 + days(254), None, FLAT)
    assert status_of(only(kept.entries)) is Status.ARCHIVED

    result = merge(existing, [], T0 + days(255), None, FLAT)
    assert [e.id for e in result.entries] == ["e2"]
    forgotten = [c for c in result.changes if c.kind is ChangeKind.FORGOTTEN]
    assert len(forgotten) == 1
    change = forgotten[0]
    assert change.entry_id == "e1"
    assert change.content == "用户曾尝试用 Vue 写前端"
    assert change.old_score == pytest.approx(0.6 * 0.99**248)
    assert change.new_score is None
    assert change.detail == "score below forget line"


def test_mixed_scenario_in_flat_mode() -> None:
    now = T0 + days(120)
    existing = [
        entry("fresh", 0.5, at=now - days(3)),  # in grace: unchanged
        entry(
            "hit", 0.6, at=now - days(17), content="用户每天早上查看股票行情"
        ),  # decays, reinforced
        entry("fade", 0.3, at=now - days(57)),  # 0.3 * 0.99**50 = 0.182 -> archived
        entry("gone", 0.1, at=now - days(107)),  # 0.1 * 0.99**100 = 0.037 -> forgotten
        entry("pin", 0.3, at=T0, pinned=True),  # never decays
    ]
    cands = [
        Candidate("用户每天早上查看股票行情", "fact"),
        Candidate("项目决定使用 FastAPI 而非 Flask", "decision", Importance.HIGH),
    ]
    result = merge(existing, cands, now, "sess-9", FLAT)
    got = {e.id: e for e in result.entries}
    assert "gone" not in got
    assert got["fresh"] == existing[0]
    hit_decayed = 0.6 * 0.99**10
    assert got["hit"].score == pytest.approx(hit_decayed + (1 - hit_decayed) * 0.2)
    assert got["hit"].hits == 1
    assert got["hit"].last_activated == now
    assert got["fade"].score == pytest.approx(0.3 * 0.99**50)
    assert status_of(got["fade"]) is Status.ARCHIVED
    assert got["pin"].score == 0.3
    new = [e for e in result.entries if e.id not in {x.id for x in existing}]
    assert len(new) == 1
    assert (new[0].content, new[0].score, new[0].category) == (
        "项目决定使用 FastAPI 而非 Flask",
        0.8,
        "decision",
    )
    assert result.stats == {
        "add": 1,
        "reinforce": 1,
        "decay": 3,  # hit, fade, gone
        "archive": 1,
        "forget": 1,
    }
    # Sorted best first.
    assert [e.score for e in result.entries] == sorted(
        (e.score for e in result.entries), reverse=True
    )
    assert result.entries[0].id == new[0].id


def test_decay_all_is_merge_without_candidates() -> None:
    existing = [entry("e1", 0.6), entry("e2", 0.04)]
    result = decay_all(existing, T0 + days(30))
    assert [e.id for e in result.entries] == ["e1"]
    assert result.count(ChangeKind.FORGOTTEN) == 1


# --- contradiction, categories, pins, expiry ---------------------------------------------


def test_contradiction_halves() -> None:
    assert contradict(0.8) == 0.4
    existing = [entry("e1", 0.8, content="用户住在北京")]
    result = merge(existing, [Candidate("用户搬到了上海", contradicts=("e1",))], T0, "s")
    assert only(result.entries).score == pytest.approx(0.4)
    assert only(result.entries).last_activated == T0
    assert result.count(ChangeKind.CONTRADICTED) == 1
    assert result.count(ChangeKind.ADDED) == 1
    # Contradicting an unknown id is ignored.
    other = merge(existing, [Candidate("x y z", contradicts=("nope",))], T0, "s")
    assert other.count(ChangeKind.CONTRADICTED) == 0


def test_contradiction_can_archive() -> None:
    existing = [entry("e1", 0.3)]
    result = merge(existing, [Candidate("new fact", contradicts=("e1",))], T0, "s")
    assert only(result.entries).score == pytest.approx(0.15)
    assert result.count(ChangeKind.ARCHIVED) == 1


def test_per_category_decay_rates() -> None:
    policy = ScoringPolicy(decay="flat", category_decay={"todo": 0.9, "preference": 1.0})
    existing = [
        entry("todo", 0.8, category="todo"),
        entry("fact", 0.8, category="fact"),
        entry("pref", 0.8, category="preference"),
    ]
    now = T0 + days(17)
    result = merge(existing, [], now, None, policy)
    got = {e.id: e.score for e in result.entries}
    assert got["todo"] == pytest.approx(0.8 * 0.9**10)
    assert got["fact"] == pytest.approx(0.8 * 0.99**10)
    assert got["pref"] == 0.8
    assert policy.daily_factor(entry(category="todo")) == 0.9
    assert policy.daily_factor(entry(category="unknown")) == 0.99
    # An entry given a class keeps its class's rate whatever its category.
    classed = entry(category="todo", memory_class=MemoryClass.FACT)
    assert ScoringPolicy(category_decay={"todo": 0.9}).daily_factor(classed) == pytest.approx(
        math.exp(-0.008)
    )


def test_pinned_never_decays_and_is_never_archived_by_score() -> None:
    existing = [entry("p", 0.1, pinned=True), entry("q", 0.6, pinned=True)]
    result = merge(existing, [], T0 + days(3000), None)
    assert result.changes == []
    assert {e.id: e.score for e in result.entries} == {"p": 0.1, "q": 0.6}
    for e in result.entries:
        assert status_of(e) is Status.ACTIVE
    text = render_memory(result.entries, now=T0)
    assert text.index("### [p]") < text.index("## Archived Memories")
    assert days_until_below(existing[1], 0.2, T0) is None
    assert projection(existing[1], T0, 400) == [0.6] * 401


def test_pinned_entry_below_forget_line_is_kept() -> None:
    existing = [entry("p", 0.01, pinned=True)]
    assert merge(existing, [], T0 + days(1000), None).entries == existing


def test_expired_todo_is_archived_with_reason() -> None:
    due = T0 + days(2)
    existing = [
        entry("todo", 0.8, category="todo", expires_at=due),
        entry("fact", 0.8, category="fact", expires_at=due),
    ]
    before = merge(existing, [], due - timedelta(seconds=1), None)
    assert before.changes == []
    result = merge(existing, [], due, None)
    todo = only(result.entries, "todo")
    assert todo.archived is ArchiveReason.EXPIRED
    assert status_of(todo) is Status.ARCHIVED
    assert todo.score < 0.2
    archived = [c for c in result.changes if c.kind is ChangeKind.ARCHIVED]
    assert [(c.entry_id, c.detail) for c in archived] == [("todo", "expired")]
    # Only todos expire.
    assert only(result.entries, "fact").archived is None
    # The flag survives a save.
    reparsed = {e.id: e for e in parse_memory(render_memory(result.entries, now=due)).entries}
    assert reparsed["todo"].archived is ArchiveReason.EXPIRED
    # And a later merge does not archive it again.
    assert merge(result.entries, [], due + days(1), None).count(ChangeKind.ARCHIVED) == 0


def test_already_expired_candidate_is_not_added() -> None:
    result = merge([], [Candidate("past meeting", "todo", expires_at=T0 - days(1))], T0, "s")
    assert result.entries == []
    assert result.changes == []


def test_reinforcing_an_archived_entry_restores_it() -> None:
    existing = [entry("e1", 0.18, content="用户曾尝试用 Vue 写前端")]
    result = merge(existing, [Candidate("用户曾尝试用 Vue 写前端")], T0, "s")
    e1 = only(result.entries)
    assert e1.score == pytest.approx(0.18 + 0.82 * 0.2)
    assert status_of(e1) is Status.ACTIVE
    assert result.count(ChangeKind.RESTORED) == 1


def test_reinforcing_a_manually_archived_entry_keeps_it_archived() -> None:
    existing = [entry("e1", 0.7, archived=ArchiveReason.MANUAL)]
    result = merge(existing, [Candidate("memory number e1")], T0, "s")
    e1 = only(result.entries)
    assert e1.archived is ArchiveReason.MANUAL
    assert e1.hits == 1


# --- idempotency -------------------------------------------------------------------------


def test_seen_session_is_skipped() -> None:
    existing = [entry("e1", 0.6)]
    result = merge(
        existing,
        [Candidate("memory number e1"), Candidate("brand new")],
        T0 + days(100),
        "s1",
        seen_sessions=frozenset({"s1"}),
    )
    assert result.skipped
    assert result.entries == existing
    assert result.changes == []


def test_same_session_does_not_reinforce_twice() -> None:
    cands = [Candidate("用户喜欢用中文交流", "preference")]
    first = merge([], cands, T0, "s1")
    second = merge(first.entries, cands, T0 + days(1), "s1")
    assert second.entries == first.entries
    assert second.changes == []
    # A candidate matched to an entry that already lists the session does not count.
    existing = [entry("e1", 0.6, sessions=("s0", "s1"))]
    again = merge(existing, [Candidate("memory number e1")], T0 + days(1), "s1")
    assert only(again.entries) == existing[0]
    # Another session does.
    other = merge(existing, [Candidate("memory number e1")], T0 + days(1), "s2")
    assert only(other.entries).hits == 1


def test_merge_is_pure() -> None:
    existing = [entry("e1", 0.6)]
    snapshot = list(existing)
    merge(existing, [Candidate("memory number e1")], T0 + days(30), "s1")
    assert existing == snapshot


# --- projections -------------------------------------------------------------------------

policies = st.builds(
    ScoringPolicy,
    decay=st.sampled_from(["class", "flat"]),
    daily_decay=st.floats(min_value=0.5, max_value=0.999),
    grace_days=st.integers(min_value=0, max_value=14),
)
offsets = st.integers(min_value=0, max_value=200 * 86400)


@settings(max_examples=300, deadline=None)
@given(
    score=st.floats(min_value=0.001, max_value=1.0),
    activated=offsets,
    scored=offsets,
    asked=offsets,
    threshold=st.sampled_from([0.2, 0.05]) | st.floats(min_value=0.001, max_value=1.0),
    policy=policies,
    pinned=st.booleans(),
)
def test_days_until_below_agrees_with_score_at(
    score: float,
    activated: int,
    scored: int,
    asked: int,
    threshold: float,
    policy: ScoringPolicy,
    pinned: bool,
) -> None:
    last = T0 + timedelta(seconds=activated)
    scored_at = max(last, T0 + timedelta(seconds=scored))
    when = scored_at + timedelta(seconds=asked)
    e = MemoryEntry(
        id="e",
        content="c",
        category="fact",
        score=score,
        created_at=last,
        last_activated=last,
        scored_at=scored_at,
        pinned=pinned,
    )
    n = days_until_below(e, threshold, when, policy)
    if n is None:
        assert pinned
        assert all(s == score for s in projection(e, when, 30, policy))
        return
    assert n >= 0
    assert score_at(e, when + days(n), policy) < threshold
    if n > 0:
        assert score_at(e, when + days(n - 1), policy) >= threshold
    # projection is score_at day by day, and never rises.
    horizon = min(n + 2, 400)
    series = projection(e, when, horizon, policy)
    assert len(series) == horizon + 1
    for d, value in enumerate(series):
        assert value == score_at(e, when + days(d), policy)
    assert all(b <= a for a, b in itertools.pairwise(series))


def test_days_until_below_examples_in_flat_mode() -> None:
    e = entry("e1", 0.6)
    # 110 decay days after the 7-day grace.
    assert days_until_below(e, 0.2, T0, FLAT) == 117
    assert days_until_below(e, 0.05, T0, FLAT) == 255
    assert days_until_below(e, 0.2, T0 + days(117), FLAT) == 0
    assert days_until_below(e, 0.2, T0 + days(3), FLAT) == 114
    assert days_until_below(e, 0.2, T0 + days(50), FLAT) == 67
    assert math.isclose(projection(e, T0, 37, FLAT)[37], 0.6 * 0.99**30)


def test_policy_defaults_are_the_seeds() -> None:
    assert DEFAULT_POLICY.reinforce_rate == 0.2
    assert DEFAULT_POLICY.contradict_factor == 0.5
    assert DEFAULT_POLICY.daily_decay == 0.99
    assert DEFAULT_POLICY.grace_days == 7
    assert DEFAULT_POLICY.archive_below == 0.2
    assert DEFAULT_POLICY.forget_below == 0.05


# --- the fast paths give what the plain rules give ----------------------------------------
#
# `merge` writes `status_of`, `score_at` and `expire` out in one loop, builds entries and
# changes without the frozen dataclasses' `__init__`, sorts in two steps and matches
# candidates through an index. `reference_merge` below is the merge as it was written
# before those speed-ups, from the public rules; the two must agree exactly.

ZONES: list[tzinfo] = [
    UTC,
    timezone(timedelta(hours=8)),
    timezone(-timedelta(hours=5, minutes=30)),
    ZoneInfo("Europe/Berlin"),
    ZoneInfo("America/New_York"),
]
DST_EDGES = [
    datetime(2026, 3, 29, 1, 30, tzinfo=UTC),  # Europe's spring-forward night
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # and its fall-back night
    datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # America/New_York's fall-back
]
WORDS = [
    "coffee", "tea", "Coffee!", "咖啡", "茶", "green", "tea,", " ", "x", "morning",
    "3", "4", "三", "Leo", "Max", "不", "not", "Monday",
]  # fmt: skip


def _reference_similar(a: str, b: str, threshold: float = 0.85) -> bool:
    if not a or not b:
        return False
    shorter, longer = sorted((len(a), len(b)))
    if shorter / longer < threshold:
        return False
    ga = frozenset({a[i : i + 2] for i in range(len(a) - 1)} or {a})
    gb = frozenset({b[i : i + 2] for i in range(len(b) - 1)} or {b})
    return len(ga & gb) / len(ga | gb) >= threshold


def _reference_sort(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    return sorted(entries, key=lambda e: (-e.score, -e.last_activated.timestamp(), e.id))


def reference_merge(
    existing: Sequence[MemoryEntry],
    candidates: Sequence[Candidate],
    now: datetime,
    session_id: str | None,
    policy: ScoringPolicy,
) -> MergeResult:
    changes: list[Change] = []
    before = {e.id: status_of(e, policy) for e in existing}
    by_id: dict[str, MemoryEntry] = {}
    for e in existing:
        score = score_at(e, now, policy)
        result = e
        if score != e.score:
            result = e.with_(score=score, scored_at=now)
            changes.append(Change(ChangeKind.DECAYED, e.id, e.score, score, e.content, e.category))
        if e.archived is None and e.category == "todo" and is_expired(e, now):
            result = expire(result, policy)
        by_id[e.id] = result
    by_norm: dict[str, str] = {}
    for e in by_id.values():
        by_norm.setdefault(normalize_content(e.content), e.id)
    for cand in candidates:
        content = cand.content.strip()
        if not content:
            continue
        for target in cand.contradicts:
            merge_module._contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        # Alike entries in the order they are looked at: named, same text, similar, same
        # skeleton.
        alike = [cand.matches] if cand.matches and cand.matches in by_id else []
        alike += [by_norm[norm]] if norm in by_norm else []
        alike += [
            e.id
            for e in by_id.values()
            if e.category == cand.category
            and _reference_similar(normalize_content(e.content), norm)
        ]
        if len(norm) <= SKELETON_MAX:
            alike += [
                e.id
                for e in by_id.values()
                if e.category == cand.category
                and len(normalize_content(e.content)) <= SKELETON_MAX
                and skeleton(e.content) == skeleton(content)
            ]
        relations = [(e_id, relation(by_id[e_id].content, content)) for e_id in alike]
        restated = [e_id for e_id, rel in relations if rel is Relation.RESTATES]
        updated = [e_id for e_id, rel in relations if rel is Relation.UPDATES]
        if restated:
            merge_module._reinforce(by_id, restated[0], now, session_id, policy, changes)
            continue
        new = MemoryEntry(
            id=merge_module.new_entry_id(set(by_id)),
            content=content,
            category=cand.category,
            score=initial_score(cand.importance),
            created_at=now,
            last_activated=now,
            scored_at=now,
            source_session=session_id,
            confidence=cand.confidence,
            expires_at=cand.expires_at,
            sessions=(session_id,) if session_id else (),
            memory_class=cand.memory_class,
            granularity=cand.granularity,
            importance=cand.importance,
        )
        if is_expired(new, now):
            continue
        detail = ""
        if updated:
            target = believed(updated, {i: by_id[i].score for i in updated})
            merge_module._contradict(by_id, target, now, policy, changes, f"updated by {new.id}")
            detail = f"updates {target}"
        by_id[new.id] = new
        by_norm.setdefault(norm, new.id)
        changes.append(
            Change(ChangeKind.ADDED, new.id, None, new.score, content, new.category, detail)
        )
    survivors = []
    for e in by_id.values():
        old, status = before.get(e.id), status_of(e, policy)
        if status is Status.FORGOTTEN:
            changes.append(
                Change(
                    ChangeKind.FORGOTTEN,
                    e.id,
                    e.score,
                    None,
                    e.content,
                    e.category,
                    "score below forget line",
                )
            )
            continue
        survivors.append(e)
        if old is Status.ACTIVE and status is Status.ARCHIVED:
            reason = e.archived.value if e.archived else "score below archive line"
            changes.append(
                Change(ChangeKind.ARCHIVED, e.id, e.score, e.score, e.content, e.category, reason)
            )
        elif old is Status.ARCHIVED and status is Status.ACTIVE:
            changes.append(
                Change(
                    ChangeKind.RESTORED,
                    e.id,
                    e.score,
                    e.score,
                    e.content,
                    e.category,
                    "score back above archive line",
                )
            )
    return MergeResult(entries=_reference_sort(survivors), changes=changes)


def _moment(rng: random.Random, zone: tzinfo | None) -> datetime:
    base = rng.choice(DST_EDGES) + timedelta(
        days=rng.randint(-60, 3), seconds=rng.randrange(86400) * rng.randint(0, 1)
    )
    if rng.random() < 0.3:
        base += timedelta(microseconds=rng.randrange(10**6))
    return base.replace(tzinfo=None) if zone is None else base.astimezone(zone)


def _random_entries(rng: random.Random, naive: bool) -> list[MemoryEntry]:
    out = []
    for number in range(rng.randint(0, 30)):
        zone = None if naive else rng.choice(ZONES)
        created = _moment(rng, zone)
        last = created + timedelta(hours=rng.randint(0, 2000)) if rng.random() < 0.7 else created
        if not naive and rng.random() < 0.3:
            last = last.astimezone(rng.choice(ZONES))  # another zone than created_at
        scored = last + timedelta(hours=rng.randint(0, 2000)) if rng.random() < 0.6 else last
        out.append(
            MemoryEntry(
                id=f"e{rng.randint(0, 40) if rng.random() < 0.05 else number}",
                content=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
                category=rng.choice(["fact", "todo", "preference", "made-up"]),
                score=rng.choice(
                    [rng.random(), 0.6, 0.04, 0.2, 0.19, 1.0, 0.0, round(rng.random(), 2)]
                ),
                created_at=created,
                last_activated=last,
                scored_at=scored,
                hits=rng.randint(0, 4),
                expires_at=_moment(rng, None if naive else rng.choice(ZONES)) + days(40)
                if rng.random() < 0.3
                else None,
                pinned=rng.random() < 0.1,
                archived=rng.choice(
                    [None, None, None, ArchiveReason.MANUAL, ArchiveReason.EXPIRED]
                ),
                sessions=tuple(rng.sample(["s1", "s2", "s3"], rng.randint(0, 2))),
                memory_class=rng.choice([None, None, *MemoryClass]),
            )
        )
    return out


def _random_candidates(rng: random.Random, existing: list[MemoryEntry]) -> list[Candidate]:
    out = []
    for _ in range(rng.randint(0, 5)):
        if existing and rng.random() < 0.4:
            content = rng.choice(existing).content + rng.choice(["", "!", " x", "  "])
        else:
            content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        out.append(
            Candidate(
                content=content,
                category=rng.choice(["fact", "todo", "preference"]),
                importance=rng.choice(list(Importance)),
                matches=rng.choice([None, None, "e1", "nope"]),
                contradicts=tuple(rng.sample(["e0", "e2", "zz"], rng.randint(0, 1))),
                memory_class=rng.choice([None, None, *MemoryClass]),
            )
        )
    return out


def _fields(items: Iterable[object]) -> list[str]:
    """repr, which tells 0.0 from -0.0, 1 from 1.0 and a tzinfo from another."""
    return [repr(item) for item in items]


def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """New entries get n0, n1, ... so two merges of the same input can be compared."""
    counter = itertools.count()
    monkeypatch.setattr(merge_module, "new_entry_id", lambda taken: f"n{next(counter)}")


@pytest.mark.parametrize("seed", range(40))
def test_merge_matches_the_plain_rules(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    policies = [
        DEFAULT_POLICY,
        ScoringPolicy(category_decay={"todo": 0.9}, grace_days=0),
        ScoringPolicy(decay="flat", category_decay={"preference": 0.95}),
    ]
    for round_ in range(15):
        naive = round_ % 10 == 9
        existing = _random_entries(rng, naive)
        candidates = _random_candidates(rng, existing)
        zone = None if naive else rng.choice(ZONES)
        now = _moment(rng, zone) + timedelta(days=rng.uniform(-5, 300))
        policy = rng.choice(policies)
        session = rng.choice([None, "s1", "s9"])
        fixed_ids(monkeypatch)
        fast = merge(existing, candidates, now, session, policy)
        fixed_ids(monkeypatch)
        plain = reference_merge(existing, candidates, now, session, policy)
        assert _fields(fast.entries) == _fields(plain.entries)
        assert _fields(fast.changes) == _fields(plain.changes)
        assert all(type(e) is MemoryEntry for e in fast.entries)
        assert all(type(c) is Change for c in fast.changes)


@pytest.mark.parametrize("seed", range(20))
def test_sort_entries_matches_the_full_key(seed: int) -> None:
    rng = random.Random(seed)
    items = _random_entries(rng, naive=False)
    tied = [e.with_(score=rng.choice([0.5, 0.25, e.score])) for e in items]
    nan = [*tied, entry("nan", float("nan"))] if seed % 4 == 0 else tied
    for group in (items, tied, nan):
        assert _fields(sort_entries(group)) == _fields(_reference_sort(group))


def test_fuzzy_similarity_matches_the_set_formula() -> None:
    rng = random.Random(7)
    alphabet = "abcde咖啡茶"
    for _ in range(3000):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        b = a if rng.random() < 0.2 else "".join(rng.choice(alphabet) for _ in range(len(a)))
        if rng.random() < 0.5 and a:
            b = a[: rng.randrange(len(a))] + rng.choice(alphabet) + a[rng.randrange(len(a)) :]
        assert matching._similar(a, b) == _reference_similar(a, b)


def test_build_entry_is_an_ordinary_frozen_entry() -> None:
    plain = entry("e1", 0.6, sessions=("s1",), expires_at=T0 + days(3))
    fast = build_entry(*(getattr(plain, name) for name in MemoryEntry.__slots__))
    assert type(fast) is MemoryEntry
    assert fast == plain
    assert hash(fast) == hash(plain)
    assert repr(fast) == repr(plain)
    with pytest.raises(FrozenInstanceError):
        fast.score = 0.1  # type: ignore[misc]
    rescored = plain.rescored(0.3, T0 + days(9))
    assert rescored == plain.with_(score=0.3, scored_at=T0 + days(9))
    assert type(rescored) is MemoryEntry


def test_build_change_is_an_ordinary_frozen_change() -> None:
    args = (ChangeKind.DECAYED, "e1", 0.6, 0.5, "text", "fact", "why")
    fast, plain = build_change(*args), Change(*args)
    assert type(fast) is Change
    assert fast == plain
    assert hash(fast) == hash(plain)
    assert repr(fast) == repr(plain)
    with pytest.raises(FrozenInstanceError):
        fast.detail = "x"  # type: ignore[misc]
    assert build_change(*args[:6]) == Change(*args[:6])


# --- updates: alike texts that differ in a number, date, name or negation ----------------

GRADE_3 = "My son Leo is in grade 3 at Hillview primary school"
GRADE_4 = "My son Leo is in grade 4 at Hillview primary school"


@pytest.mark.parametrize("fast_path", [False, True])
def test_a_changed_number_is_an_update_not_a_reinforcement(fast_path: bool) -> None:
    old = entry("e1", 0.6, content=GRADE_3)
    now = T0 + days(1)
    run = add_candidates if fast_path else (lambda e, c, n: merge(e, c, n, None))
    result = run([old], [Candidate(GRADE_4)], now)
    new = next(e for e in result.entries if e.content == GRADE_4)
    assert only(result.entries).score == pytest.approx(0.3)  # contradicted * 0.5
    assert only(result.entries).content == GRADE_3  # kept, readable
    assert new.score == 0.6 and new.hits == 0
    assert result.count(ChangeKind.REINFORCED) == 0
    assert result.outcome == Outcome(Kept.UPDATED, new.id, "e1")
    assert result.outcome.describe() == f"updated [e1] -> [{new.id}]"
    [contradicted] = [c for c in result.changes if c.kind is ChangeKind.CONTRADICTED]
    assert contradicted.detail == f"updated by {new.id}"


def test_another_name_is_a_memory_of_its_own() -> None:
    old = entry("e1", 0.6, content=GRADE_3)
    result = merge([old], [Candidate(GRADE_3.replace("Leo", "Max"))], T0, None)
    assert only(result.entries).score == 0.6  # untouched
    assert len(result.entries) == 2
    assert result.outcome is not None and result.outcome.kept is Kept.SAVED


def test_a_restatement_among_updates_is_reinforced() -> None:
    """After an update, the new text said again reinforces the new entry, not the old."""
    first = merge([entry("e1", 0.6, content=GRADE_3)], [Candidate(GRADE_4)], T0, None)
    again = merge(first.entries, [Candidate(GRADE_4 + ".")], T0, None)
    assert again.outcome is not None and again.outcome.kept is Kept.REINFORCED
    assert by_content(again.entries)[GRADE_4].hits == 1
    assert by_content(again.entries)[GRADE_3].score == pytest.approx(0.3)


def test_a_named_match_that_changes_a_number_is_an_update() -> None:
    result = merge(
        [entry("e1", 0.6, content="用户不喜欢喝咖啡")],
        [Candidate("用户喜欢喝咖啡", matches="e1")],
        T0,
        None,
    )
    assert result.outcome is not None and result.outcome.kept is Kept.UPDATED
    assert len(result.entries) == 2


def test_same_memory_does_not_join_an_update() -> None:
    assert not same_memory(entry("a", content=GRADE_3), entry("b", content=GRADE_4))
    assert same_memory(entry("a", content=GRADE_4), entry("b", content=GRADE_4 + "!"))


def by_content(entries: Iterable[MemoryEntry]) -> dict[str, MemoryEntry]:
    return {e.content: e for e in entries}


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        ("我儿子上三年级", "我儿子上四年级", Kept.UPDATED),
        ("我喜欢乌龙茶", "我不喜欢乌龙茶", Kept.UPDATED),
        ("I like tea", "I don't like tea", Kept.UPDATED),
        ("我儿子上三年级", "我儿子上3年级", Kept.REINFORCED),
    ],
)
def test_short_texts_are_compared_by_their_skeleton(old: str, new: str, kept: Kept) -> None:
    """Too short for their bigrams to be alike, yet the same text but for a number or a
    negation."""
    result = merge([entry("e1", 0.6, content=old)], [Candidate(new)], T0, None)
    assert result.outcome is not None
    assert (result.outcome.kept, result.outcome.replaced) == (
        kept,
        "e1" if kept is Kept.UPDATED else None,
    )


def test_an_update_replaces_the_version_now_believed() -> None:
    """Three grades in a row: each update halves the one before it, not the first again
    (which would halve it away)."""
    result = merge([entry("e1", 0.6, content=GRADE_3)], [Candidate(GRADE_4)], T0, None)
    grade_5 = GRADE_3.replace("3", "5")
    again = merge(result.entries, [Candidate(grade_5)], T0, None)
    scores = {e.content: e.score for e in again.entries}
    assert scores == pytest.approx({GRADE_3: 0.3, GRADE_4: 0.3, grade_5: 0.6})


def test_long_texts_are_left_to_the_bigrams() -> None:
    """Past `SKELETON_MAX` one changed number keeps the bigrams alike: still an update."""
    filler = " and the rest of a long note about the school run" * 5
    long_old, long_new = GRADE_3 + filler, GRADE_4 + filler
    assert len(normalize_content(long_old)) > SKELETON_MAX
    result = merge([entry("e1", 0.6, content=long_old)], [Candidate(long_new)], T0, None)
    assert result.outcome is not None and result.outcome.kept is Kept.UPDATED
