"""The merge's rules beyond reinforcement and decay: contradiction, categories, pins and
expiry, idempotency, projections, and updates (alike texts that differ in a number, date,
name or negation)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import (
    ArchiveReason,
    MemoryClass,
    MemoryEntry,
)
from memory_core.base.merge_values import (
    ChangeKind,
    Kept,
    Outcome,
    Proposal,
)
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm.matching import SKELETON_MAX, normalize_content, same_memory
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import (
    Status,
    contradict,
    days_until_below,
    projection,
    score_at,
    status_of,
)
from tests.support import add_candidates
from tests.unit.scoring_support import (
    FLAT,
    T0,
    days,
    entry,
    only,
)

# --- updates: alike texts that differ in a number, date, name or negation ----------------

GRADE_3 = "My son Leo is in grade 3 at Hillview primary school"
GRADE_4 = "My son Leo is in grade 4 at Hillview primary school"


@pytest.mark.parametrize("fast_path", [False, True])
def test_a_changed_number_is_an_update_not_a_reinforcement(fast_path: bool) -> None:
    old = entry("e1", 0.6, content=GRADE_3)
    now = T0 + days(1)
    run = add_candidates if fast_path else (lambda e, c, n: merge(e, c, n, None))
    result = run([old], [Proposal(GRADE_4)], now)
    new = next(e for e in result.entries if e.content == GRADE_4)
    assert only(result.entries).score == pytest.approx(0.3)  # contradicted: × 0.5
    assert only(result.entries).content == GRADE_3  # kept, readable
    assert new.score == 0.6 and new.hits == 0
    assert result.count(ChangeKind.REINFORCED) == 0
    assert result.outcome == Outcome(Kept.UPDATED, new.id, "e1")
    assert result.outcome.describe() == f"updated [e1] -> [{new.id}]"
    [contradicted] = [c for c in result.changes if c.kind is ChangeKind.CONTRADICTED]
    assert contradicted.detail == f"updated by {new.id}"


def test_another_name_is_a_memory_of_its_own() -> None:
    old = entry("e1", 0.6, content=GRADE_3)
    result = merge([old], [Proposal(GRADE_3.replace("Leo", "Max"))], T0, None)
    assert only(result.entries).score == 0.6  # untouched
    assert len(result.entries) == 2
    assert result.outcome is not None and result.outcome.kept is Kept.SAVED


def test_a_restatement_among_updates_is_reinforced() -> None:
    """After an update, the new text said again reinforces the new entry, not the old."""
    first = merge([entry("e1", 0.6, content=GRADE_3)], [Proposal(GRADE_4)], T0, None)
    again = merge(first.entries, [Proposal(GRADE_4 + ".")], T0, None)
    assert again.outcome is not None and again.outcome.kept is Kept.REINFORCED
    assert by_content(again.entries)[GRADE_4].hits == 1
    assert by_content(again.entries)[GRADE_3].score == pytest.approx(0.3)


def test_a_named_match_that_changes_a_number_is_an_update() -> None:
    result = merge(
        [entry("e1", 0.6, content="用户不喜欢喝咖啡")],
        [Proposal("用户喜欢喝咖啡", matches="e1")],
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
    result = merge([entry("e1", 0.6, content=old)], [Proposal(new)], T0, None)
    assert result.outcome is not None
    assert (result.outcome.kept, result.outcome.replaced) == (
        kept,
        "e1" if kept is Kept.UPDATED else None,
    )


def test_an_update_replaces_the_version_now_believed() -> None:
    """Three grades in a row: each update halves the one before it, not the first again
    (which would halve it away)."""
    result = merge([entry("e1", 0.6, content=GRADE_3)], [Proposal(GRADE_4)], T0, None)
    grade_5 = GRADE_3.replace("3", "5")
    again = merge(result.entries, [Proposal(grade_5)], T0, None)
    scores = {e.content: e.score for e in again.entries}
    assert scores == pytest.approx({GRADE_3: 0.3, GRADE_4: 0.3, grade_5: 0.6})


def test_long_texts_are_left_to_the_bigrams() -> None:
    """Past `SKELETON_MAX` one changed number keeps the bigrams alike: still an update."""
    filler = " and the rest of a long note about the school run" * 5
    long_old, long_new = GRADE_3 + filler, GRADE_4 + filler
    assert len(normalize_content(long_old)) > SKELETON_MAX
    result = merge([entry("e1", 0.6, content=long_old)], [Proposal(long_new)], T0, None)
    assert result.outcome is not None and result.outcome.kept is Kept.UPDATED


# --- contradiction, categories, pins, expiry ---------------------------------------------


def test_contradiction_halves() -> None:
    assert contradict(0.8) == 0.4
    existing = [entry("e1", 0.8, content="用户住在北京")]
    result = merge(existing, [Proposal("用户搬到了上海", contradicts=("e1",))], T0, "s")
    assert only(result.entries).score == pytest.approx(0.4)
    assert only(result.entries).last_activated == T0
    assert result.count(ChangeKind.CONTRADICTED) == 1
    assert result.count(ChangeKind.ADDED) == 1
    # Contradicting an unknown id is ignored.
    other = merge(existing, [Proposal("x y z", contradicts=("nope",))], T0, "s")
    assert other.count(ChangeKind.CONTRADICTED) == 0


def test_contradiction_can_archive() -> None:
    existing = [entry("e1", 0.3)]
    result = merge(existing, [Proposal("new fact", contradicts=("e1",))], T0, "s")
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
    result = merge([], [Proposal("past meeting", "todo", expires_at=T0 - days(1))], T0, "s")
    assert result.entries == []
    assert result.changes == []


def test_reinforcing_an_archived_entry_restores_it() -> None:
    existing = [entry("e1", 0.18, content="用户曾尝试用 Vue 写前端")]
    result = merge(existing, [Proposal("用户曾尝试用 Vue 写前端")], T0, "s")
    e1 = only(result.entries)
    assert e1.score == pytest.approx(0.18 + 0.82 * 0.2)
    assert status_of(e1) is Status.ACTIVE
    assert result.count(ChangeKind.RESTORED) == 1


def test_reinforcing_a_manually_archived_entry_keeps_it_archived() -> None:
    existing = [entry("e1", 0.7, archived=ArchiveReason.MANUAL)]
    result = merge(existing, [Proposal("memory number e1")], T0, "s")
    e1 = only(result.entries)
    assert e1.archived is ArchiveReason.MANUAL
    assert e1.hits == 1


# --- idempotency -------------------------------------------------------------------------


def test_seen_session_is_skipped() -> None:
    existing = [entry("e1", 0.6)]
    result = merge(
        existing,
        [Proposal("memory number e1"), Proposal("brand new")],
        T0 + days(100),
        "s1",
        seen_sessions=frozenset({"s1"}),
    )
    assert result.skipped
    assert result.entries == existing
    assert result.changes == []


def test_same_session_does_not_reinforce_twice() -> None:
    cands = [Proposal("用户喜欢用中文交流", "preference")]
    first = merge([], cands, T0, "s1")
    second = merge(first.entries, cands, T0 + days(1), "s1")
    assert second.entries == first.entries
    assert second.changes == []
    # A candidate matched to an entry that already lists the session does not count.
    existing = [entry("e1", 0.6, sessions=("s0", "s1"))]
    again = merge(existing, [Proposal("memory number e1")], T0 + days(1), "s1")
    assert only(again.entries) == existing[0]
    # Another session does.
    other = merge(existing, [Proposal("memory number e1")], T0 + days(1), "s2")
    assert only(other.entries).hits == 1


def test_merge_is_pure() -> None:
    existing = [entry("e1", 0.6)]
    snapshot = list(existing)
    merge(existing, [Proposal("memory number e1")], T0 + days(30), "s1")
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
