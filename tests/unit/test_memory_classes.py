"""Memory classes: each decays at its own rate under the lifecycle's rules,
and the ranking score is built from visible terms."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.base.entries import (
    CATEGORIES,
    CATEGORY_CLASSES,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    class_of,
    confidence_of,
    granularity_of,
)
from memory_core.base.errors import ConfigError
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.config import load_config
from memory_core.llm.extract import candidates_from_json
from memory_core.longterm.decay import decay_all
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import (
    ACCESS_BONUS_MAX,
    IMPORTANCE_BONUS,
    Status,
    access_bonus,
    days_until_below,
    rank_entries,
    rank_terms,
    reinforce,
    score_at,
    status_of,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LAMBDA = {
    MemoryClass.FACT: 0.008,
    MemoryClass.BELIEF: 0.07,
    MemoryClass.SUMMARY: 0.025,
    MemoryClass.EVENT: 0.15,
}


def entry(
    memory_class: MemoryClass | None = None,
    score: float = 0.6,
    *,
    category: str = "fact",
    entry_id: str = "e1",
    **kw: object,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=f"memory {entry_id}",
        category=category,
        score=score,
        created_at=T0,
        last_activated=T0,
        scored_at=T0,
        memory_class=memory_class,
        **kw,  # type: ignore[arg-type]
    )


# --- which class an entry has ------------------------------------------------------------


def test_every_seed_category_has_a_documented_class() -> None:
    assert set(CATEGORY_CLASSES) == set(CATEGORIES)
    assert class_of(entry(category="preference")) is MemoryClass.FACT
    assert class_of(entry(category="experience")) is MemoryClass.FACT  # 经验: know-how
    assert class_of(entry(category="todo")) is MemoryClass.FACT  # its expiry archives it
    assert class_of(entry(category="something-a-person-invented")) is MemoryClass.FACT


def test_a_given_class_wins_over_the_category() -> None:
    assert class_of(entry(MemoryClass.BELIEF, category="preference")) is MemoryClass.BELIEF
    assert granularity_of(entry(MemoryClass.SUMMARY)) is Granularity.COMPOSITE
    assert granularity_of(entry(MemoryClass.FACT)) is Granularity.ATOMIC
    assert granularity_of(entry(granularity=Granularity.COMPOSITE)) is Granularity.COMPOSITE


def test_confidence_defaults_by_class() -> None:
    assert confidence_of(entry(MemoryClass.FACT)) == 1.0
    assert confidence_of(entry(MemoryClass.BELIEF)) < 0.8
    assert confidence_of(entry(MemoryClass.BELIEF, confidence=0.9)) == 0.9


# --- decay per class: 30/90/180-day simulations -------------------------------------------


@pytest.mark.parametrize("memory_class", list(MemoryClass))
@pytest.mark.parametrize("day", [30, 90, 180])
def test_class_decay_at_30_90_180_days(memory_class: MemoryClass, day: int) -> None:
    e = entry(memory_class)
    expected = 0.6 * math.exp(-LAMBDA[memory_class] * (day - 7))
    assert score_at(e, T0 + timedelta(days=day)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("memory_class", "at_30", "at_90", "at_180"),
    [
        # 0.6·e^(-0.008·23) = 0.50, ·83 → 0.31, ·173 → 0.15
        (MemoryClass.FACT, Status.ACTIVE, Status.ACTIVE, Status.ARCHIVED),
        # 0.6·e^(-0.07·23) = 0.12: archived within a month, gone by 90 days
        (MemoryClass.BELIEF, Status.ARCHIVED, Status.FORGOTTEN, Status.FORGOTTEN),
        # 0.34, 0.075, 0.008
        (MemoryClass.SUMMARY, Status.ACTIVE, Status.ARCHIVED, Status.FORGOTTEN),
        # 0.019: an event nobody recalls is forgotten within a month
        (MemoryClass.EVENT, Status.FORGOTTEN, Status.FORGOTTEN, Status.FORGOTTEN),
    ],
)
def test_class_lifecycle_simulated_day_by_day(
    memory_class: MemoryClass, at_30: Status, at_90: Status, at_180: Status
) -> None:
    """Daily decay runs over half a year; where each class stands at 30, 90 and 180 days."""
    entries = [entry(memory_class)]
    seen: dict[int, Status] = {}
    for day in range(1, 181):
        entries = decay_all(entries, T0 + timedelta(days=day)).entries
        if day in (30, 90, 180):
            seen[day] = status_of(entries[0]) if entries else Status.FORGOTTEN
    assert seen == {30: at_30, 90: at_90, 180: at_180}


@pytest.mark.parametrize(
    ("memory_class", "half_life"),
    [
        (MemoryClass.FACT, 87),
        (MemoryClass.BELIEF, 10),
        (MemoryClass.SUMMARY, 28),
        (MemoryClass.EVENT, 5),
    ],
)
def test_half_lives_are_the_seeds(memory_class: MemoryClass, half_life: int) -> None:
    e = entry(memory_class, score=0.8)
    halved = days_until_below(e, 0.4, T0)
    assert halved is not None
    assert halved - 7 == pytest.approx(half_life, abs=1)


def test_daily_steps_equal_one_jump_for_every_class() -> None:
    entries = [entry(kind, entry_id=kind.value) for kind in MemoryClass]
    stepped = entries
    for day in range(1, 41):
        stepped = decay_all(stepped, T0 + timedelta(days=day)).entries
    direct = decay_all(entries, T0 + timedelta(days=40)).entries
    assert {e.id: e.score for e in stepped} == pytest.approx({e.id: e.score for e in direct})


def test_reinforcement_restarts_the_grace_for_any_class() -> None:
    belief = entry(MemoryClass.BELIEF)
    now = T0 + timedelta(days=12)
    decayed = score_at(belief, now)
    result = merge([belief], [Proposal(belief.content, matches=belief.id)], now, "s2")
    again = result.entries[0]
    assert again.score == pytest.approx(reinforce(decayed))
    assert again.last_activated == now
    assert score_at(again, now + timedelta(days=7)) == again.score  # grace again
    assert again.memory_class is MemoryClass.BELIEF


def test_flat_mode_is_seed_002_for_every_class() -> None:
    flat = ScoringPolicy(decay="flat")
    for kind in MemoryClass:
        assert score_at(entry(kind), T0 + timedelta(days=37), flat) == pytest.approx(0.6 * 0.99**30)


def test_a_category_override_applies_only_to_entries_classed_by_category() -> None:
    policy = ScoringPolicy(category_decay={"experience": 1.0})
    by_category = entry(category="experience")  # a fact by its category
    given = entry(MemoryClass.EVENT, category="experience", entry_id="e2")
    later = T0 + timedelta(days=30)
    assert score_at(by_category, later, policy) == 0.6
    assert score_at(given, later, policy) == pytest.approx(0.6 * math.exp(-0.15 * 23))


def test_configured_lambdas_reach_the_policy(tmp_path: Path) -> None:
    path = tmp_path / "chatmem.toml"
    path.write_text(
        "[scoring]\nclass_decay = { fact = 0.0, belief = 0.1, summary = 0.02, event = 0.2 }\n",
        encoding="utf-8",
    )
    policy = load_config(path, env={}).scoring.policy()
    assert score_at(entry(MemoryClass.FACT), T0 + timedelta(days=500), policy) == 0.6
    assert score_at(entry(MemoryClass.EVENT), T0 + timedelta(days=8), policy) == pytest.approx(
        0.6 * math.exp(-0.2)
    )


@pytest.mark.parametrize(
    "text",
    [
        "[scoring]\nclass_decay = { fact = 0.008 }\n",
        "[scoring]\nclass_decay = { fact = 0.008, belief = 0.07, summary = 0.025, event = -1 }\n",
        "[scoring]\ndecay = 'linear'\n",
    ],
)
def test_bad_class_settings_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chatmem.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"scoring\.(class_decay|decay)"):
        load_config(path, env={})


# --- contradiction of beliefs -----------------------------------------------------------


def test_a_contradicted_belief_loses_confidence_a_fact_does_not() -> None:
    belief = entry(MemoryClass.BELIEF, confidence=0.7, entry_id="b")
    fact = entry(MemoryClass.FACT, entry_id="f")
    result = merge(
        [belief, fact], [Proposal("the user moved to Shanghai", contradicts=("b", "f"))], T0, "s"
    )
    got = {e.id: e for e in result.entries}
    assert got["b"].confidence == pytest.approx(0.35)
    assert got["b"].score == pytest.approx(0.3)
    assert got["f"].confidence is None
    assert got["f"].score == pytest.approx(0.3)
    assert result.count(ChangeKind.CONTRADICTED) == 2
    # The lower confidence lowers the belief's rank below the equally scored fact's.
    assert rank_terms(got["b"], T0).total < rank_terms(got["f"], T0).total


# --- ranking score ------------------------------------------------------------------------


def test_rank_is_base_times_decay_plus_bonuses() -> None:
    e = entry(MemoryClass.FACT, hits=5, importance=Importance.HIGH, confidence=0.9)
    when = T0 + timedelta(days=40)
    terms = rank_terms(e, when)
    assert terms.base == pytest.approx(0.6 * 0.9)
    assert terms.decay == pytest.approx(math.exp(-0.008 * 33))
    assert terms.access == pytest.approx(access_bonus(5))
    assert terms.importance == IMPORTANCE_BONUS[Importance.HIGH]
    assert terms.total == pytest.approx(terms.base * terms.decay + terms.access + terms.importance)


def test_access_bonus_grows_with_hits_and_is_capped() -> None:
    values = [access_bonus(n) for n in (0, 1, 3, 10, 20, 1000)]
    assert values[0] == 0.0
    assert values == sorted(values)
    assert values[-1] == values[-2] == ACCESS_BONUS_MAX


def test_older_entries_without_importance_count_as_medium() -> None:
    assert rank_terms(entry(), T0).importance == IMPORTANCE_BONUS[Importance.MEDIUM]


def test_pinned_entries_do_not_decay_in_the_rank() -> None:
    e = entry(MemoryClass.EVENT, pinned=True)
    assert rank_terms(e, T0 + timedelta(days=300), DEFAULT_POLICY).decay == 1.0


# --- the file --------------------------------------------------------------------------


def test_labels_ride_in_the_metadata_comment_and_round_trip() -> None:
    e = entry(
        MemoryClass.BELIEF,
        granularity=Granularity.ATOMIC,
        importance=Importance.LOW,
        confidence=0.55,
    )
    text = render_memory([e], now=T0)
    header = next(line for line in text.splitlines() if line.startswith("### "))
    assert header == "### [e1] fact | 0.60 | 2026-03-01 | 0"  # the header line, unchanged
    assert '"memory_class": "belief"' in text
    assert '"granularity": "atomic"' in text
    assert '"importance": "low"' in text
    parsed = parse_memory(text)
    assert parsed.entries == [e]


def test_an_older_file_reads_unchanged_and_renders_byte_for_byte() -> None:
    old = render_memory([entry(category="experience")], now=T0)
    assert "memory_class" not in old
    parsed = parse_memory(old).entries[0]
    assert parsed.memory_class is None and parsed.importance is None
    assert class_of(parsed) is MemoryClass.FACT
    assert render_memory([parsed], now=T0) == old


def test_unknown_labels_in_a_hand_edit_fall_back_to_the_category() -> None:
    text = render_memory([entry(MemoryClass.FACT)], now=T0).replace(
        '"memory_class": "fact"', '"memory_class": "rumour"'
    )
    parsed = parse_memory(text)
    assert parsed.quarantined == []
    assert parsed.entries[0].memory_class is None


# --- extraction ---------------------------------------------------------------------------


def test_extraction_may_give_class_and_confidence() -> None:
    got = candidates_from_json(
        [
            {"content": "用户似乎更喜欢晚上工作", "memory_class": "belief", "confidence": 0.6},
            {"content": "User lives in Berlin", "memory_class": "FACT", "confidence": 1},
            {"content": "went hiking on Saturday", "memory_class": "summary"},
            {"content": "bad confidence", "confidence": 7},
            {"content": "not a number", "confidence": "high"},
        ]
    )
    assert [(c.memory_class, c.confidence) for c in got] == [
        (MemoryClass.BELIEF, 0.6),
        (MemoryClass.FACT, 1.0),
        (None, None),  # summaries come from consolidation, not from a conversation
        (None, None),
        (None, None),
    ]
    added = merge([], got[:1], T0, "s").entries[0]
    assert added.memory_class is MemoryClass.BELIEF
    assert added.confidence == 0.6
    assert added.importance is Importance.MEDIUM


@pytest.mark.parametrize("seed", range(20))
def test_rank_entries_is_the_brute_force_ranking(seed: int) -> None:
    """The early stop never drops an entry a full ranking would have kept."""
    import random

    rng = random.Random(seed)
    entries = [
        entry(
            rng.choice([None, *MemoryClass]),
            round(rng.random(), 3),
            entry_id=f"e{n}",
            hits=rng.randint(0, 30),
            importance=rng.choice([None, *Importance]),
            confidence=rng.choice([None, rng.random()]),
            pinned=rng.random() < 0.05,
        ).with_(last_activated=T0 - timedelta(days=rng.randint(0, 200)))
        for n in range(rng.randint(0, 120))
    ]
    when = T0 + timedelta(days=rng.randint(0, 60))
    limit = rng.randint(1, 30)
    got = rank_entries(entries, when, limit)
    active = [e for e in entries if e.archived is None and (e.pinned or score_at(e, when) >= 0.2)]
    expected = sorted(active, key=lambda e: -rank_terms(e, when).total)[:limit]
    assert [round(rank, 12) for _, rank in got] == [
        round(rank_terms(e, when).total, 12) for e in expected
    ]


def test_a_journalled_capture_keeps_its_class_through_a_replay() -> None:
    from memory_core.longterm.staging import _payload, _Staged, _staged_from
    from memory_core.storage.journal import JournalRow

    staged = _Staged(
        Proposal("went hiking at Mount Tai", memory_class=MemoryClass.EVENT, new_id="n1"),
        "cli",
        T0,
        None,
        [],
    )
    row = JournalRow(seq=7, scope="main", payload=_payload(staged))
    replayed = _staged_from(row)
    assert replayed is not None
    assert replayed.candidate.memory_class is MemoryClass.EVENT
    assert replayed.candidate.new_id == "n1"
