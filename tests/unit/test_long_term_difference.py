"""What the index tokenizes again after a long-term write: the difference is exact, and
it is computed in a worker thread, never on the event loop."""

from __future__ import annotations

import gc
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
