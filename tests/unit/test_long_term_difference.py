"""What the index tokenizes again after a long-term write: the difference is exact, and
it is computed in a worker thread, never on the event loop."""

from __future__ import annotations

import gc
import random
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

import memory_core.recall.index.long_term_difference as difference
import memory_core.recall.index.writes as writes
from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from memory_core.longterm.claims import shown

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def entry(entry_id: str, content: str, score: float = 0.5) -> MemoryEntry:
    return MemoryEntry(entry_id, content, "fact", score, NOW, NOW, NOW)


def test_between_versions_finds_added_edited_and_removed() -> None:
    same, rescored, edited, gone = (
        entry("a", "tea"),
        entry("b", "coffee"),
        entry("c", "juice"),
        entry("d", "water"),
    )
    added = entry("e", "milk")
    after = [same, rescored.with_(score=0.9), edited.with_(content="orange juice"), added]
    stale, fresh = difference.between_versions([same, rescored, edited, gone], after)
    # A new score is not a new text: the chunk stays and only moves.
    assert stale == ["c", "d"]
    assert [e.id for e in fresh] == ["c", "e"]
    assert fresh[0].content == "orange juice"


def test_against_chunks_compares_text_and_time() -> None:
    kept, moved, edited = entry("a", "tea"), entry("b", "coffee"), entry("c", "juice")
    saved = format_when(NOW)
    held = {
        "a": ("tea", saved),
        "b": ("coffee", "2020-01-01 00:00"),  # the same text, saved at another time
        "c": ("lemonade", saved),
        "x": ("gone", saved),
    }
    stale, fresh = difference.against_chunks(held, [kept, moved, edited, entry("n", "new")])
    assert stale == ["b", "c", "x"]
    assert [e.id for e in fresh] == ["b", "c", "n"]


@pytest.mark.storage
async def test_a_write_is_compared_off_the_event_loop(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await core.memories.capture(MAIN, "drinks oolong tea")
    await core.memories.flush()
    threads: list[bool] = []
    real = difference.between_versions

    def spy(*args: list[MemoryEntry]) -> tuple[list[str], list[MemoryEntry]]:
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args)

    monkeypatch.setattr(difference, "between_versions", spy)
    await core.memories.capture(MAIN, "works on the billing service")
    await core.memories.flush()
    assert threads == [False]


@pytest.mark.storage
async def test_a_write_is_indexed_with_the_collector_paused(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison's objects live until the index is written: no collection runs
    over them meanwhile, and the collector runs again once the write is indexed."""
    await core.memories.capture(MAIN, "drinks oolong tea")
    await core.memories.flush()
    collecting: list[bool] = []
    real_compare, real_write = difference.between_versions, writes.apply_long_term

    def compare(*args: list[MemoryEntry]) -> tuple[list[str], list[MemoryEntry]]:
        collecting.append(gc.isenabled())
        return real_compare(*args)

    def write(*args: Any, **kwargs: Any) -> None:
        collecting.append(gc.isenabled())
        real_write(*args, **kwargs)

    monkeypatch.setattr(difference, "between_versions", compare)
    monkeypatch.setattr(writes, "apply_long_term", write)
    assert gc.isenabled()
    await core.memories.capture(MAIN, "works on the billing service")
    await core.memories.flush()
    assert collecting == [False, False]
    assert gc.isenabled()


def _plain_between(
    before: list[MemoryEntry], after: list[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    """The comparison as first written: every entry by id."""
    old = {e.id: e for e in before}
    new = {e.id: e for e in after}

    def changed(a: MemoryEntry, b: MemoryEntry | None) -> bool:
        return b is None or (b is not a and shown(b) != shown(a))

    stale = [i for i, e in old.items() if changed(e, new.get(i))]
    fresh = [e for i, e in new.items() if changed(e, old.get(i))]
    return stale, fresh


def _edited(rng: random.Random, before: list[MemoryEntry]) -> list[MemoryEntry]:
    """`before` as a write could leave it: most entries the same objects, some rescored,
    edited, removed, added, moved, repeated, or given another entry's id."""
    after = list(before)
    for _ in range(rng.randint(0, 8)):
        kind = rng.randrange(8)
        at = rng.randrange(len(after) + 1)
        if kind == 0 and after:
            del after[min(at, len(after) - 1)]
        elif kind == 1:
            after.insert(at, entry(f"n{rng.randrange(6)}", rng.choice(["tea", "milk"])))
        elif kind == 2 and after:
            old = after[min(at, len(after) - 1)]
            after[min(at, len(after) - 1)] = old.with_(score=rng.random())
        elif kind == 3 and after:
            old = after[min(at, len(after) - 1)]
            after[min(at, len(after) - 1)] = old.with_(
                content=rng.choice(["tea", "juice", old.content + "!"]),
                speaker=rng.choice([None, "Ann"]),
            )
        elif kind == 4 and after:
            moved = after.pop(min(at, len(after) - 1))
            after.insert(rng.randrange(len(after) + 1), moved)
        elif kind == 5 and after:
            after.insert(at, rng.choice(after))  # the same object twice
        elif kind == 6 and after:
            other = rng.choice(after)
            after.insert(at, entry(other.id, rng.choice([other.content, "water"])))
        elif kind == 7 and len(after) > 1:
            start = rng.randrange(len(after))
            part = after[start : start + rng.randint(2, 6)]
            rng.shuffle(part)
            after[start : start + len(part)] = part
    return after


@pytest.mark.parametrize("seed", range(30))
def test_between_versions_matches_the_plain_comparison(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk by identity gives exactly what comparing every entry by id gives, order
    included: ids twice, objects twice, moves, and the fallback when the walk gives up."""
    rng = random.Random(seed)
    for round_ in range(40):
        monkeypatch.setattr(difference, "_FEWEST_GAPS", rng.choice([64, 2, 0]))
        monkeypatch.setattr(difference, "_WINDOW", rng.choice([48, 3, 1]))
        before = [
            entry(f"e{rng.randrange(40) if rng.random() < 0.1 else n}", rng.choice(["tea", "x"]))
            for n in range(rng.randint(0, 40))
        ]
        if before and rng.random() < 0.2:
            before.insert(rng.randrange(len(before)), rng.choice(before))
        after = _edited(rng, before)
        if round_ % 10 == 9:
            before, after = after, before
        stale, fresh = difference.between_versions(before, after)
        plain_stale, plain_fresh = _plain_between(before, after)
        assert stale == plain_stale
        assert [id(e) for e in fresh] == [id(e) for e in plain_fresh]
        as_tuples = difference.between_versions(tuple(before), tuple(after))
        assert as_tuples[0] == plain_stale
        assert [id(e) for e in as_tuples[1]] == [id(e) for e in plain_fresh]
