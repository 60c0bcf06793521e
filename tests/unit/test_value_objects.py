"""The value objects of the long lists (`SearchRequest`, `NewMessage`, `EntryFields`), and
the day a search is read on when its request names none: the injected clock's, never the
machine's (`SearchIndex.search` and `fallback.search_files` read `datetime.now` before)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.entries import EntryFields, MemoryEntry, build_entry
from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.request import SearchRequest
from memory_core.storage.sessions import NewMessage
from tests.conftest import START
from tests.support import index_of

QUESTION = "what did I note yesterday?"
"""No word of it is in any note: the time alone picks the hits."""


async def write_errands(core: MemoryCore) -> None:
    """One note on each of the four days up to the clock's."""
    for back in range(4):
        await core.notes.append(MAIN, f"errand {back}", now=START - timedelta(days=back, hours=-1))


async def test_an_index_search_without_a_day_reads_the_injected_clock(
    core: MemoryCore, clock: ManualClock
) -> None:
    await write_errands(core)
    index = index_of(core)
    hits = await index.search(MAIN, QUESTION)
    assert [h.text for h in hits] == ["errand 1"]
    # The clock moves, and "yesterday" with it (the machine's day never counts).
    clock.set(START - timedelta(days=2))
    hits = await index.search(MAIN, QUESTION)
    assert [h.text for h in hits] == ["errand 3"]
    # A request's own day wins over the clock.
    asked = SearchRequest(QUESTION, today=(START - timedelta(days=1)).date())
    assert [h.text for h in await index.search(MAIN, asked)] == ["errand 2"]


async def test_the_files_fallback_reads_its_day_on_the_clock_it_is_given(
    core: MemoryCore,
) -> None:
    await write_errands(core)
    found = fallback.search_files(
        core.workspace, MAIN, QUESTION, clock=ManualClock(START - timedelta(days=1))
    )
    assert [h.text for h in found] == ["errand 2"]
    # The finder's degraded path gives it the core's day.
    assert [h.text for h in await core.finder.search(MAIN, QUESTION)] == ["errand 1"]


async def test_one_request_reaches_the_index_and_the_files_alike(core: MemoryCore) -> None:
    """The options of one request filter the same way on both paths."""
    await write_errands(core)
    await core.memories.capture(MAIN, "errand list kept in the kitchen")
    await core.memories.flush()
    request = SearchRequest(
        "errand",
        limit=3,
        kinds=iter([ChunkKind.DAILY]),  # an iterator: read by both, kept as a tuple
        since=START - timedelta(days=2, hours=-2),
        exclude_paths=[f"memory/{START.date().isoformat()}.md"],
        today=START.date(),
    )
    assert request.kinds == (ChunkKind.DAILY,)
    indexed = [h.text for h in await index_of(core).search(MAIN, request)]
    files = [h.text for h in fallback.search_files(core.workspace, MAIN, request)]
    assert sorted(indexed) == sorted(files) == ["errand 1"]


def test_new_message_is_stored_as_given() -> None:
    at = datetime(2026, 3, 1, 9, tzinfo=UTC)
    message = NewMessage(MAIN, "s1", "user", "hello", at, "Li", "u-7", indexed=True)
    stored = message.stored(42)
    assert (stored.id, stored.scope, stored.session_id, stored.speaker_id) == (
        42,
        MAIN.value,
        "s1",
        "u-7",
    )
    assert (stored.meta, stored.archive_attempts, stored.compacted) == ({}, 0, False)
    with pytest.raises(FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


def test_entry_fields_copied_and_changed_build_an_ordinary_entry() -> None:
    plain = MemoryEntry("e1", "likes tea", "preference", 0.8, START, START, START, hits=2)
    fields = EntryFields.of(plain)
    fields.score = 0.5
    built = build_entry(fields)
    assert type(built) is MemoryEntry
    assert built == plain.with_(score=0.5)
    assert hash(built) == hash(plain.with_(score=0.5))
    with pytest.raises(FrozenInstanceError):
        built.score = 0.1  # type: ignore[misc]
    assert plain.score == 0.8  # the copy's change did not reach the original
