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

import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import (
    Importance,
)
from memory_core.base.merge_values import (
    ChangeKind,
    Proposal,
)
from memory_core.base.policy import ScoringPolicy
from memory_core.longterm.decay import decay_all
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import (
    Status,
    decayed_score,
    initial_score,
    reinforce,
    score_at,
    status_of,
)
from tests.unit.scoring_support import (
    FLAT,
    T0,
    days,
    entry,
    only,
)

"""The flat 0.99 a day, which these lifecycle tests were written against."""


# --- new memories ------------------------------------------------------------------------


def test_initial_scores() -> None:
    assert initial_score(Importance.HIGH) == 0.8
    assert initial_score(Importance.MEDIUM) == 0.6
    assert initial_score(Importance.LOW) == 0.4
    assert initial_score("high") == 0.8


def test_new_candidates_get_initial_scores() -> None:
    cands = [
        Proposal("用户偏好用 pytest 而非 unittest", "preference", Importance.MEDIUM),
        Proposal("用户提到下周三有产品评审会议", "todo", Importance.HIGH),
        Proposal("the user once tried Vue", "fact", Importance.LOW),
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
    result = merge([], [Proposal("   ")], T0, None)
    assert result.entries == []
    assert result.changes == []


# --- reinforcement -----------------------------------------------------------------------


def test_reinforcement_sequence_pure() -> None:
    assert reinforce(0.6) == pytest.approx(0.68)
    assert reinforce(reinforce(0.6)) == pytest.approx(0.744)


def test_reinforcement_sequence_through_merge() -> None:
    existing = [entry("e1", 0.6)]
    t1 = T0 + days(1)
    first = merge(existing, [Proposal("memory number e1")], t1, "s1")
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
    second = merge(first.entries, [Proposal("Memory   number E1!")], t2, "s2")
    e1 = only(second.entries)
    assert e1.score == pytest.approx(0.744)
    assert e1.hits == 2
    assert e1.last_activated == t2
    assert e1.sessions == ("s1", "s2")


def test_reinforcement_by_explicit_match_id() -> None:
    existing = [entry("e1", 0.6, content="用户喜欢简洁的代码风格")]
    result = merge(existing, [Proposal("completely different words", matches="e1")], T0, "s")
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
        entries = merge(entries, [Proposal("memory number e1")], T0, f"s{n}").entries
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
        Proposal("用户每天早上查看股票行情", "fact"),
        Proposal("项目决定使用 FastAPI 而非 Flask", "decision", Importance.HIGH),
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
