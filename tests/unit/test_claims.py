"""Whose fact it is (longterm/claims.py): the pure rule, through `merge` and
`apply_candidates`, the MEMORY.md field that carries the speaker, and extraction's
speakers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.cli.commands import entry_json, entry_line
from memory_core.base.entries import Importance, MemoryClass, MemoryEntry
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.speaker_label import is_claim_text, without_label
from memory_core.llm.extract import (
    TranscriptLine,
    build_extraction_messages,
    candidates_from_json,
    heuristic_candidates,
)
from memory_core.longterm import parse_cache
from memory_core.longterm.claims import (
    as_member,
    first_person,
    group_speaker,
    is_self_fact,
    other_subject,
    same_speaker,
    shown,
)
from memory_core.longterm.matching import EntryView
from memory_core.longterm.memory_md_parser import ParsedMemory, parse_memory
from memory_core.longterm.memory_md_renderer import render_entry, render_memory
from memory_core.longterm.merge import apply_candidates, merge
from memory_core.longterm.prompt import render_prompt_memories
from memory_core.snapshot.builder import index_line

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GROUP = ScopeKey("group:telegram:-100")
GRADE_3 = "My son Leo is in grade 3 at Hillview primary school"
GRADE_4 = "My son Leo is in grade 4 at Hillview primary school"
ALICE_4 = "Alice's son Leo is in grade 4 at Hillview primary school"
"""Bob's word on Alice's GRADE_3: names her, so it is compared with what she said."""


def entry(
    entry_id: str,
    content: str,
    *,
    speaker: str | None = None,
    score: float = 0.8,
    claim_on: str | None = None,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=content,
        category="fact",
        score=score,
        created_at=NOW - timedelta(hours=1),
        last_activated=NOW - timedelta(hours=1),
        scored_at=NOW - timedelta(hours=1),
        importance=Importance.HIGH,
        speaker=speaker,
        claim_on=claim_on,
    )


def by_id(entries: list[MemoryEntry]) -> dict[str, MemoryEntry]:
    return {e.id: e for e in entries}


# --- who a text is about ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I live in Berlin", True),
        ("I'm allergic to peanuts", True),
        ("My son Leo is in grade 3", True),
        ("Call me after 6", True),
        ("我住在北京", True),
        ("本人对花生过敏", True),
        ("我们下周去杭州", False),  # "we": a group's plan, not one member's self
        ("Alice lives in Paris", False),
        ("The office is in Berlin", False),
        ("Grade III history", False),
    ],
)
def test_first_person(text: str, expected: bool) -> None:
    assert first_person(text) is expected


def test_a_self_fact_is_first_person_or_names_its_speaker() -> None:
    assert is_self_fact(entry("a", "I live in Berlin", speaker="Alice"))
    assert is_self_fact(entry("a", "Alice lives in Berlin", speaker="alice"))
    assert is_self_fact(entry("a", "爱丽丝住在北京", speaker="爱丽丝"))
    assert is_self_fact(entry("a", "Alice's son is in grade 3", speaker="Alice Smith"))
    assert not is_self_fact(entry("a", "Bobby's son is in grade 3", speaker="Bob"))
    assert not is_self_fact(entry("a", "The office is in Berlin", speaker="Alice"))
    assert not is_self_fact(entry("a", "I live in Berlin"))  # no speaker: no member's
    assert not is_self_fact(entry("a", "I live in Paris", speaker="Bob", claim_on="x"))


def test_speakers_are_recorded_in_group_scopes_only() -> None:
    assert group_speaker(GROUP, " Alice\n Smith ") == "Alice Smith"
    assert group_speaker(GROUP, "") is None
    assert group_speaker(MAIN, "Alice") is None
    assert group_speaker(ScopeKey("peer:42"), "Alice") is None
    assert same_speaker("Ａｌｉｃｅ", "alice")
    assert not same_speaker("Alice", None)


# --- the rule through the merge ---------------------------------------------------------


def test_another_members_update_becomes_a_claim_and_leaves_the_self_fact() -> None:
    alice = entry("a1", GRADE_3, speaker="Alice")
    result = merge([alice], [Proposal(ALICE_4, speaker="Bob")], NOW, "s1")
    kept = by_id(result.entries)
    assert kept["a1"].score == alice.score  # not demoted
    assert result.count(ChangeKind.CONTRADICTED) == 0
    (claim,) = [e for e in result.entries if e.id != "a1"]
    (added,) = [c for c in result.changes if c.kind is ChangeKind.ADDED]
    assert (added.entry_id, added.detail) == (claim.id, "claim on a1")
    assert result.outcome is not None and result.outcome.kept.value == "saved"
    assert (claim.speaker, claim.claim_on) == ("Bob", "a1")
    assert claim.memory_class is MemoryClass.BELIEF
    assert claim.confidence == 0.6
    assert shown(claim) == f"(claim by Bob) {ALICE_4}"
    assert shown(kept["a1"]) == f"(by Alice) {GRADE_3}"


def test_without_speakers_an_update_demotes_as_before() -> None:
    """Outside a group nothing records a speaker: the update rule is today's."""
    old = entry("a1", GRADE_3)
    result = merge([old], [Proposal(GRADE_4)], NOW, "s1")
    assert by_id(result.entries)["a1"].score == pytest.approx(0.4)
    (new,) = [e for e in result.entries if e.id != "a1"]
    assert (new.speaker, new.claim_on, new.memory_class) == (None, None, None)
    assert shown(new) == GRADE_4


def test_a_named_contradiction_of_a_self_fact_is_dropped_for_a_claim() -> None:
    alice = entry("a1", "I am vegetarian", speaker="Alice")
    other = entry("o1", "The team lunch is on Friday", speaker="Alice")
    cand = Proposal("Alice eats meat now", speaker="Bob", contradicts=("a1", "o1"))
    result = merge([alice, other], [cand], NOW, "s1")
    kept = by_id(result.entries)
    assert kept["a1"].score == alice.score
    assert kept["o1"].score == pytest.approx(0.4)  # not a self-fact: Bob may correct it
    (claim,) = [e for e in result.entries if e.id not in ("a1", "o1")]
    assert claim.claim_on == "a1"


def test_own_updates_and_other_facts_follow_the_usual_rule() -> None:
    alice = entry("a1", GRADE_3, speaker="Alice")
    result = merge([alice], [Proposal(GRADE_4, speaker="Alice")], NOW, "s1")
    assert by_id(result.entries)["a1"].score == pytest.approx(0.4)
    lunch = entry("o1", "The team lunch is on Friday", speaker="Alice")
    result = merge([lunch], [Proposal("The team lunch is on Monday", speaker="Bob")], NOW, "s2")
    assert by_id(result.entries)["o1"].score == pytest.approx(0.4)
    assert all(e.claim_on is None for e in result.entries)


def test_the_members_restatement_wins_again() -> None:
    alice = entry("a1", GRADE_3, speaker="Alice")
    first = merge([alice], [Proposal(ALICE_4, speaker="Bob")], NOW, "s1")
    (claim_id,) = [e.id for e in first.entries if e.id != "a1"]
    # Bob says it again: his claim is reinforced, Alice's fact still untouched.
    again = merge(first.entries, [Proposal(ALICE_4, speaker="Bob")], NOW, "s2")
    assert by_id(again.entries)["a1"].score == alice.score
    restated = merge(again.entries, [Proposal(GRADE_3, speaker="Alice")], NOW, "s3")
    kept = by_id(restated.entries)
    assert kept["a1"].score > alice.score
    claim = kept[claim_id]
    assert claim.score < by_id(again.entries)[claim_id].score
    assert claim.confidence is not None and claim.confidence < 0.6
    refuted = [c for c in restated.changes if c.kind is ChangeKind.CONTRADICTED]
    assert [(c.entry_id, c.detail) for c in refuted] == [(claim_id, "refuted by Alice")]
    ordered = [e.id for e in restated.entries]
    assert ordered.index("a1") < ordered.index(claim_id)
    # The same session merged onto its own result again refutes nothing twice.
    twice = merge(restated.entries, [Proposal(GRADE_3, speaker="Alice")], NOW, "s3")
    assert by_id(twice.entries)[claim_id] == claim


def test_a_capture_applies_the_same_rule() -> None:
    alice = entry("a1", GRADE_3, speaker="Alice")
    view = EntryView.of([alice])
    changes = apply_candidates(view, [Proposal(ALICE_4, speaker="Bob")], NOW)
    assert [c.kind for c in changes] == [ChangeKind.ADDED]
    assert view.by_id["a1"].score == alice.score
    (claim,) = [e for e in view.by_id.values() if e.id != "a1"]
    assert claim.claim_on == "a1"
    changes = apply_candidates(view, [Proposal(GRADE_3, speaker="Alice")], NOW)
    assert [(c.kind, c.entry_id) for c in changes] == [
        (ChangeKind.REINFORCED, "a1"),
        (ChangeKind.CONTRADICTED, claim.id),
    ]
    assert view.by_id["a1"].score > view.by_id[claim.id].score


def test_the_prompt_shows_claims_as_claims_after_the_facts() -> None:
    claim = entry("b1", ALICE_4, speaker="Bob", claim_on="a1", score=0.9)
    alice = entry("a1", GRADE_3, speaker="Alice", score=0.8)
    block = render_prompt_memories([claim, alice])
    lines = block.splitlines()
    assert lines[-2:] == [f"- [fact] (by Alice) {GRADE_3}", f"- [fact] (claim by Bob) {ALICE_4}"]
    assert is_claim_text(shown(claim)) and not is_claim_text(shown(alice))


# --- MEMORY.md and the parse cache ------------------------------------------------------


def test_the_speaker_round_trips_through_memory_md() -> None:
    items = [
        entry("a1", GRADE_3, speaker="Alice"),
        entry("b1", ALICE_4, speaker='Bob "the" builder', claim_on="a1", score=0.5),
    ]
    text = render_memory(items, now=NOW)
    assert '"speaker": "Alice"' in text
    assert '"claim_on": "a1"' in text
    assert by_id(parse_memory(text).entries) == by_id(items)


def test_a_file_without_the_fields_reads_and_writes_as_before() -> None:
    plain = entry("a1", GRADE_3)
    block = render_entry(plain)
    assert "speaker" not in block[1] and "claim_on" not in block[1]
    (parsed,) = parse_memory("\n".join(block)).entries
    assert parsed == plain and parsed.speaker is None and parsed.claim_on is None


def test_bad_speaker_fields_are_ignored() -> None:
    block = render_entry(entry("a1", GRADE_3))
    block[1] = block[1].replace('"score"', '"speaker": 7, "claim_on": "no spaces!", "score"')
    (parsed,) = parse_memory("\n".join(block)).entries
    assert (parsed.speaker, parsed.claim_on) == (None, None)


def test_the_parse_cache_keeps_the_speaker() -> None:
    items = [entry("a1", GRADE_3, speaker="Alice"), entry("b1", ALICE_4, speaker="Bob", claim_on="a1")]  # fmt: skip
    parsed = ParsedMemory(
        entries=items,
        quarantined=[],
        lines={"a1": (1, 2), "b1": (3, 4)},
        keys={"a1": b"k" * 16, "b1": b"l" * 16},
    )
    data = parse_cache.encode(parsed, b"d", 0.2)
    assert data is not None
    cached = parse_cache.decode(data)
    assert cached is not None
    assert cached.parsed.entries == items
    assert parse_cache.VERSION >= 2  # 2 added the speaker


# --- extraction names the speaker -------------------------------------------------------


def test_the_heuristic_attributes_each_sentence_to_its_speaker() -> None:
    lines = [
        TranscriptLine("user", "I live in Berlin.", "Alice"),
        TranscriptLine("user", "I live in Berlin.", "Bob"),
        TranscriptLine("assistant", "Noted."),
    ]
    found = heuristic_candidates(lines)
    assert [(c.content, c.speaker) for c in found] == [
        ("I live in Berlin", "Alice"),
        ("I live in Berlin", "Bob"),
    ]
    assert heuristic_candidates([TranscriptLine("user", "I live in Berlin.")])[0].speaker is None


def test_the_model_is_shown_speakers_and_must_name_one() -> None:
    lines = [
        TranscriptLine("user", "My son Leo is in grade 3", "Alice"),
        TranscriptLine("user", "no, Leo is in grade 4", "Bob"),
    ]
    prompt = build_extraction_messages(lines, [], NOW)[1]["content"]
    assert "user (Alice): My son Leo is in grade 3" in str(prompt)
    assert "speaker" in str(prompt)
    data = [
        {"content": "Leo is in grade 3", "speaker": "alice"},
        {"content": "Leo is in grade 4", "speaker": "Mallory"},
        {"content": "Leo likes chess"},
    ]
    found = candidates_from_json(data, (), ("Alice", "Bob"))
    assert [c.speaker for c in found] == ["Alice", None, None]
    assert candidates_from_json(data[2:], (), ("Alice",))[0].speaker == "Alice"
    assert candidates_from_json(data[:1], ())[0].speaker is None  # not a group
    solo = build_extraction_messages([TranscriptLine("user", "I live in Berlin")], [], NOW)
    assert "speaker" not in str(solo[1]["content"])


def test_the_snapshot_index_shows_claims_as_claims() -> None:
    claim = entry("b1", ALICE_4, speaker="Bob", claim_on="a1")
    assert f"(claim by Bob) {ALICE_4}" in index_line(claim, 1, 200)
    assert index_line(entry("c1", GRADE_4), 1, 200).endswith(f": {GRADE_4}")


def test_the_command_line_shows_who_said_an_entry() -> None:
    claim = entry("b1", ALICE_4, speaker="Bob", claim_on="a1")
    assert entry_json(claim)["speaker"] == "Bob" and entry_json(claim)["claim_on"] == "a1"
    assert "speaker" not in entry_json(entry("c1", GRADE_4))  # as before outside groups
    assert f"(claim by Bob) {ALICE_4}" in entry_line(1, claim)


# --- two members, two subjects (issue 34 item 2, the review's cases) ----------------------

BEIJING = "I live in Beijing"


def test_two_members_first_person_facts_are_different_facts() -> None:
    """Bob's "I" is Bob: his first-person text neither updates, restates nor becomes a
    claim on Ann's first-person fact, even word for word."""
    ann = entry("a1", BEIJING, speaker="Ann")
    for text in ("I live in Shanghai", BEIJING):
        result = merge([ann], [Proposal(text, speaker="Bob")], NOW, "s1")
        kept = by_id(result.entries)
        assert kept["a1"].score == ann.score and kept["a1"].hits == 0
        (bob,) = [e for e in result.entries if e.id != "a1"]
        assert (bob.content, bob.speaker, bob.claim_on, bob.memory_class) == (
            text, "Bob", None, None
        )  # fmt: skip
        assert shown(bob) == f"(by Bob) {text}"
    # A model naming Ann's fact as contradicted by Bob's own fact changes nothing either.
    cand = Proposal("I live in Shanghai", speaker="Bob", contradicts=("a1",))
    result = merge([ann], [cand], NOW, "s1")
    assert result.count(ChangeKind.CONTRADICTED) == 0
    assert all(e.claim_on is None for e in result.entries)


def test_a_text_naming_a_member_is_read_against_their_self_facts() -> None:
    """Bob's "Ann lives in Shanghai" is read as Ann would say it: an update of her "I live
    in Beijing", so his claim on it; "Ann lives in Beijing" restates it."""
    ann = entry("a1", BEIJING, speaker="Ann")
    view = EntryView.of([ann])
    changes = apply_candidates(view, [Proposal("Ann lives in Shanghai", speaker="Bob")], NOW)
    assert [(c.kind, c.detail) for c in changes] == [(ChangeKind.ADDED, "claim on a1")]
    assert view.by_id["a1"].score == ann.score
    changes = apply_candidates(view, [Proposal("Ann lives in Beijing", speaker="Bob")], NOW)
    assert [(c.kind, c.entry_id) for c in changes] == [(ChangeKind.REINFORCED, "a1")]
    zh = entry("z1", "我儿子上三年级", speaker="Ann")
    result = merge([zh], [Proposal("Ann的儿子上四年级", speaker="Bob")], NOW, "s1")
    (claim,) = [e for e in result.entries if e.id != "z1"]
    assert claim.claim_on == "z1" and by_id(result.entries)["z1"].score == zh.score


def test_restating_refutes_only_the_claims_on_the_fact() -> None:
    ann = entry("a1", BEIJING, speaker="Ann")
    view = EntryView.of([ann])
    apply_candidates(view, [Proposal("I live in Shanghai", speaker="Bob")], NOW)
    apply_candidates(view, [Proposal("Ann lives in Shanghai", speaker="Bob")], NOW)
    own, claim = (e for e in view.by_id.values() if e.id != "a1")
    assert (own.claim_on, claim.claim_on) == (None, "a1")
    changes = apply_candidates(view, [Proposal(BEIJING, speaker="Ann")], NOW)
    assert [(c.kind, c.entry_id) for c in changes] == [
        (ChangeKind.REINFORCED, "a1"),
        (ChangeKind.CONTRADICTED, claim.id),
    ]
    assert view.by_id[own.id] == own


def test_without_speakers_nothing_is_read_as_a_member() -> None:
    """Outside group scopes a name is a word like any other: no claim, no reinforcement."""
    old = entry("a1", BEIJING)
    result = merge([old], [Proposal("Ann lives in Shanghai")], NOW, "s1")
    kept = by_id(result.entries)["a1"]
    assert (kept.score, kept.hits) == (old.score, old.hits)
    assert all(e.claim_on is None for e in result.entries)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Ann lives in Shanghai", "Ann", ("I lives in Shanghai",)),
        ("ANN's son Leo is in grade 4", "Ann", ("my son Leo is in grade 4",)),
        ("Ann's number is 555-0143, she prefers texts", "Ann", ("my number is 555-0143, I prefers texts",)),
        ("Ann的儿子上四年级", "Ann", ("我儿子上四年级", "我的儿子上四年级")),
        ("安娜住在上海", "安娜", ("我住在上海",)),
        ("Ann Smith lives in Paris", "Ann Smith", ("I lives in Paris",)),
        ("Smith lives in Paris", "Ann Smith", ("I lives in Paris",)),
        ("Annie lives in Paris", "Ann", ()),
        ("I live in Paris", "Ann", ()),
    ],
)  # fmt: skip
def test_as_member(text: str, name: str, expected: tuple[str, ...]) -> None:
    assert as_member(text, name) == expected


def test_other_subject() -> None:
    ann = entry("a1", BEIJING, speaker="Ann")
    assert other_subject("Bob", "I live in Shanghai", ann)
    assert not other_subject("Ann", "I live in Shanghai", ann)  # her own
    assert not other_subject("Bob", "Ann lives in Shanghai", ann)  # about her
    assert not other_subject("Bob", "I think Ann lives in Shanghai", ann)  # names her
    assert not other_subject(None, "I live in Shanghai", ann)  # no group
    assert not other_subject("Bob", "I live in Shanghai", entry("o1", BEIJING))


def test_without_label_is_what_was_said() -> None:
    assert without_label("(by Alice Smith) my son is in grade 3") == "my son is in grade 3"
    assert without_label("(claim by Bob) Alice moved") == "Alice moved"
    assert without_label("no label (by Bob) here") == "no label (by Bob) here"
