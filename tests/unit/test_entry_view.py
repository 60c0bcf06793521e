"""The capture fast path (`apply_candidates` on an `EntryView`) against the full `merge`.

A staged capture touches only the entry it adds or reinforces; the write decays the rest.
These properties pin that this gives the same entries as merging the capture directly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import CATEGORIES, MemoryEntry
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.longterm.decay import decay_all
from memory_core.longterm.fact_keys import (
    Relation,
    kept_characters,
    relation,
    skeleton,
)
from memory_core.longterm.matching import SKELETON_MAX, EntryView, _similar, normalize_content
from memory_core.longterm.merge import apply_candidates, merge
from tests.support import FACT_DAY, add_candidates, believed, forget_what_texts_taught

START = datetime(2026, 1, 1, 12, tzinfo=UTC)
WORDS = [
    "tea", "coffee", "green", "black", "likes", "hates", "drinks", "morning", "用户", "喜欢",
    "3", "三", "4", "not", "不", "Leo", "Max", "I'm", "I", "am", "never", "don't", "at", "7",
    "07:00", "Mon", "Monday", "mornings", "twice", "2 times", "z0007q", "live in", "Berlin",
    "我住在", "北京", "七点",
]  # fmt: skip

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


@st.composite
def entries(draw: st.DrawFn) -> list[MemoryEntry]:
    made: list[MemoryEntry] = []
    for number, text in enumerate(draw(st.lists(texts, max_size=25))):
        activated = START + timedelta(days=draw(st.integers(0, 60)))
        made.append(
            MemoryEntry(
                id=f"e{number:04d}",
                content=text,
                category=draw(st.sampled_from(CATEGORIES[:3])),
                score=draw(st.floats(0.06, 1.0)),
                created_at=START,
                last_activated=activated,
                scored_at=activated,
                hits=draw(st.integers(0, 3)),
            )
        )
    return made


def as_rows(found: list[MemoryEntry]) -> list[tuple[object, ...]]:
    return sorted(
        (e.id, e.content, e.category, round(e.score, 9), e.hits, e.scored_at, e.archived)
        for e in found
    )


@settings(max_examples=150, deadline=None)
@given(entries(), texts, st.sampled_from(CATEGORIES[:3]))
def test_find_agrees_with_the_plain_rule(existing: list[MemoryEntry], text: str, cat: str) -> None:
    norm = normalize_content(text)
    exact = [e.id for e in existing if normalize_content(e.content) == norm]
    fuzzy = [
        e.id for e in existing if e.category == cat and _similar(normalize_content(e.content), norm)
    ]
    skeletons = [
        e.id
        for e in existing
        if e.category == cat
        and max(len(norm), len(normalize_content(e.content))) <= SKELETON_MAX
        and skeleton(e.content) == skeleton(text)
    ]
    contents = {e.id: e.content for e in existing}
    relations = [(i, relation(contents[i], text)) for i in [*exact, *fuzzy, *skeletons]]
    restated = [i for i, found in relations if found is Relation.RESTATES]
    updated = [i for i, found in relations if found is Relation.UPDATES]
    found = EntryView.of(existing).find(Proposal(text, cat), norm)
    assert found.restates == (restated or [None])[0]
    scores = {e.id: e.score for e in existing}
    assert found.updates == (None if restated or not updated else believed(updated, scores))


@settings(max_examples=150, deadline=None)
@given(entries(), st.lists(st.tuples(texts, st.sampled_from(CATEGORIES[:3])), max_size=4))
def test_staged_then_decayed_equals_merged(
    existing: list[MemoryEntry], proposed: list[tuple[str, str]]
) -> None:
    now = START + timedelta(days=90)
    cands = [Proposal(t, c, new_id=f"n{i}") for i, (t, c) in enumerate(proposed)]
    merged = merge(existing, cands, now, None)
    staged = add_candidates(existing, cands, now)
    written = decay_all(staged.entries, now)
    assert as_rows(written.entries) == as_rows(merged.entries)
    kinds = [ChangeKind.ADDED, ChangeKind.REINFORCED]
    assert [c.entry_id for c in staged.changes if c.kind in kinds] == [
        c.entry_id for c in merged.changes if c.kind in kinds
    ]


def test_the_view_is_updated_in_place() -> None:
    view = EntryView.of([])
    [added] = apply_candidates(view, [Proposal("likes green tea")], START)
    assert added.kind is ChangeKind.ADDED
    [again] = apply_candidates(view, [Proposal("Likes green tea!")], START + timedelta(days=1))
    assert (again.kind, again.entry_id) == (ChangeKind.REINFORCED, added.entry_id)
    assert view.by_id[added.entry_id].hits == 1
    assert view.entries() == [view.by_id[added.entry_id]]


def test_a_reinforced_entry_is_decayed_first() -> None:
    old = MemoryEntry("a", "likes green tea", "fact", 0.6, START, START, START)
    later = START + timedelta(days=37)  # 30 days of decay after the 7 days of grace
    result = add_candidates([old], [Proposal("likes green tea")], later)
    decayed = 0.6 * FACT_DAY**30
    assert result.entries[0].score == pytest.approx(decayed + (1 - decayed) * 0.2)
    assert [c.kind for c in result.changes] == [ChangeKind.DECAYED, ChangeKind.REINFORCED]


@settings(max_examples=150, deadline=None)
@given(entries(), texts, st.sampled_from(CATEGORIES[:3]))
def test_find_is_the_same_whatever_skeletons_are_remembered(
    existing: list[MemoryEntry], text: str, cat: str
) -> None:
    """A fresh process remembers no skeleton and tests characters first; one whose parse
    cache holds them all groups the category at once: both find the same entry."""
    norm = normalize_content(text)
    forget_what_texts_taught()
    fresh = EntryView.of(existing).find(Proposal(text, cat), norm)
    for entry in existing:
        skeleton(entry.content)
    remembered = EntryView.of(existing).find(Proposal(text, cat), norm)
    assert fresh == remembered


def test_characters_kept_by_a_skeleton_are_in_every_text_that_has_it() -> None:
    for text in ["I don't like 3 teas", "我儿子上三年级", "cannot swim on monday", "isn't 5"]:
        norm = normalize_content(text)
        assert set(kept_characters(skeleton(text))) <= set(norm)
