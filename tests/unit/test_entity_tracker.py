"""The entities kept up to date by difference are `extract_entities`' exactly, after any
sequence of edits to a file's entries."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from memory_core.base.entries import MemoryEntry
from memory_core.longterm import entity_tracker
from memory_core.longterm.entities import extract_entities
from memory_core.longterm.entity_tracker import EntityTracker, TrackerState

NOW = datetime(2026, 3, 1, tzinfo=UTC)

TEXTS = [
    "我的猫叫小橘，很喜欢吃鱼",
    "小橘昨天去看了兽医",
    "My dog is called Max",
    "my dog Max hates baths",
    "Alice moved to Hangzhou in May",
    "我老婆叫小雪",
    "小雪 likes hiking",
    "Working on project Apollo this month",
    "Apollo ships on Friday",
    "用户的猫叫小橘",
    "My dog Rex loves the beach",
    "I work at Acme Corp in Berlin",
    "The user's son Leo is in grade 3 at Hillview primary school",
    "Leo plays football",
    "User's wife is called Anna",
    "Anna and Leo went to Berlin",
    "The user has a parrot named Kiwi",
    "kiwi fruit for breakfast",
    "用户养了一只狗叫旺财",
    "用户的同事叫张伟",
    "张伟 sent the report",
    "用户在字节跳动工作",
    "The user works for Bank of China in Shanghai",
    "the cat sleeps all day",
    "nothing to see here",
    "My sister is called Anna",
    "my sister likes cake",
]


def entry(n: int, text: str) -> MemoryEntry:
    return MemoryEntry(f"e{n:04d}", text, "fact", 0.5, NOW, NOW, NOW)


@pytest.mark.parametrize("seed", range(8))
def test_every_version_gives_what_finding_them_again_gives(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every version is applied by difference (none is found again from scratch), unless
    # the share says so at the start.
    monkeypatch.setattr(entity_tracker, "REBUILD_SHARE", 10.0 if seed % 2 else 0.5)
    rng = random.Random(seed)
    entries = [entry(n, rng.choice(TEXTS)) for n in range(12)]
    tracker = EntityTracker()
    assert tracker.update(entries) == extract_entities(entries)
    serial = 100
    for _ in range(40):
        move = rng.choice(("add", "remove", "edit", "reorder", "rename"))
        if move == "add" or not entries:
            serial += 1
            entries.insert(rng.randrange(len(entries) + 1), entry(serial, rng.choice(TEXTS)))
        elif move == "remove":
            entries.pop(rng.randrange(len(entries)))
        elif move == "edit":
            at = rng.randrange(len(entries))
            entries[at] = entries[at].with_(content=rng.choice(TEXTS))
        elif move == "reorder":
            rng.shuffle(entries)
        else:  # a name some entries hold gains or loses its naming entry
            at = rng.randrange(len(entries))
            entries[at] = entries[at].with_(content=entries[at].content + " and Kiwi")
        assert tracker.update(entries) == extract_entities(entries), move


def test_an_unchanged_version_reads_no_text_again(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [entry(n, text) for n, text in enumerate(TEXTS)]
    tracker = EntityTracker()
    first = tracker.update(entries)
    calls: list[str] = []
    real = entity_tracker.named_in

    def counted(text: str) -> object:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(entity_tracker, "named_in", counted)
    assert tracker.update(list(reversed(entries))) == extract_entities(list(reversed(entries)))
    assert calls == []
    edited = [entries[0].with_(content="My dog is called Biscuit"), *entries[1:]]
    found = tracker.update(edited)
    assert calls == ["My dog is called Biscuit"]
    assert found == extract_entities(edited) != first


@pytest.mark.parametrize("seed", range(6))
def test_a_seeded_tracker_goes_on_as_the_one_that_found_them(seed: int) -> None:
    """`seed` with the holders another process kept takes up the state `update` left:
    the next versions give what finding them again gives."""
    rng = random.Random(seed)
    entries = [entry(n, rng.choice(TEXTS)) for n in range(30)]
    found = EntityTracker()
    found.update(entries)
    state = found.kept()
    kept = {word: sorted(ids) for word, ids in state.holders.items()}
    tracker = EntityTracker()
    tracker.seed(entries, TrackerState(kept, state.named, state.found))
    assert tracker.holders() == found.holders()
    for serial in range(100, 110):
        at = rng.randrange(len(entries))
        if rng.random() < 0.5:
            entries[at] = entries[at].with_(content=rng.choice(TEXTS))
        else:
            entries.insert(at, entry(serial, rng.choice(TEXTS)))
        assert tracker.update(entries) == extract_entities(entries)
    stale = EntityTracker()
    stale.seed(entries, TrackerState({**kept, "nobody": ["e0000"]}, state.named, state.found))
    assert stale.holders() == {}
    assert stale.update(entries) == extract_entities(entries)


def remade(e: MemoryEntry) -> MemoryEntry:
    """The same entry as a new object (as a write makes one whose stats it changed)."""
    return e.with_(content=e.content)


@pytest.mark.parametrize("seed", range(12))
def test_versions_compared_by_identity_give_what_finding_them_again_gives(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes keep most entries as the same objects, make some again with the same text
    (and move them), move kept objects, put in runs of entries and take some out: each
    version, by difference (from a seeded tracker every other time), is found exactly;
    with odd seeds the walk gives up at its first stop (compared by id)."""
    if seed % 2:
        monkeypatch.setattr(entity_tracker, "BLIND_BASE", 0)
        monkeypatch.setattr(entity_tracker, "BLIND_SHARE", 10**9)
    rng = random.Random(seed)
    entries = [entry(n, rng.choice(TEXTS)) for n in range(60)]
    tracker = EntityTracker()
    assert tracker.update(entries) == extract_entities(entries)
    serial = 1000
    for step in range(30):
        previous, entries = entries, list(entries)
        for _ in range(rng.randrange(1, 6)):
            move = rng.choice(("add", "run", "remove", "edit", "remake", "move", "swap"))
            at = rng.randrange(len(entries))
            if move == "add":
                serial += 1
                entries.insert(at, entry(serial, rng.choice(TEXTS)))
            elif move == "run":  # more entries in a row than the walk looks ahead
                for _ in range(rng.randrange(2, 14)):
                    serial += 1
                    entries.insert(at, entry(serial, rng.choice(TEXTS)))
            elif move == "remove" and len(entries) > 5:
                del entries[at : at + rng.randrange(1, 12)]
            elif move == "edit":
                entries[at] = entries[at].with_(content=rng.choice(TEXTS) + " and Kiwi")
            elif move == "remake":
                entries.insert(rng.randrange(len(entries)), remade(entries.pop(at)))
            elif move == "move":  # the same object elsewhere
                entries.insert(rng.randrange(len(entries)), entries.pop(at))
            else:
                other = rng.randrange(len(entries))
                entries[at], entries[other] = entries[other], entries[at]
        if step % 2:
            state = tracker.kept()
            tracker = EntityTracker()
            tracker.seed(previous, state)
            assert tracker.holders() == {w: set(h) for w, h in state.holders.items()}
        assert tracker.update(entries) == extract_entities(entries)
        previous = entries


def test_a_new_id_beside_a_kept_entry_of_that_id_is_found_the_plain_way() -> None:
    entries = [entry(n, text) for n, text in enumerate(TEXTS)]
    tracker = EntityTracker()
    tracker.update(entries)
    twice = [*entries[:5], entries[3].with_(content="My dog is called Biscuit"), *entries[5:]]
    assert tracker.update(twice) == extract_entities(twice)
    assert tracker.update(entries) == extract_entities(entries)


def test_the_walk_pairs_kept_objects_and_gives_up_on_a_large_move() -> None:
    old = [entry(n, "x") for n in range(3000)]
    new = [*old[:10], entry(9999, "y"), *old[10:20], remade(old[20]), *old[22:]]
    walked = entity_tracker._walk(old, new)  # type: ignore[arg-type]
    assert walked == ([20, 21], [10, 21])
    shuffled = list(old)
    random.Random(1).shuffle(shuffled)
    assert entity_tracker._walk(old, shuffled) is None  # type: ignore[arg-type]


def test_an_alias_gained_or_lost_changes_which_kept_entries_hold_the_entity() -> None:
    """A name's new alias is held by entries the write did not touch; and they hold it
    no more once the alias goes."""
    entries = [
        entry(0, "User's wife is called Anna"),
        entry(1, "my sister likes cake"),
        entry(2, "my wife likes tea"),
        *(entry(n, "nothing to see here") for n in range(3, 20)),
    ]
    tracker = EntityTracker()
    tracker.update(entries)
    for version in (
        [*entries, entry(50, "My sister is called Anna")],
        [remade(entries[2]), *entries[:2], *entries[3:], entry(50, "My sister is called Anna")],
        entries,
    ):
        assert tracker.update(version) == extract_entities(version)
