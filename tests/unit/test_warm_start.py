"""A serving core reads the main scope's long-term file ahead once its first search is
answered (in the background: neither the open nor that search waits), so a capture after
it answers at once; and the view read then is not trusted once the file changed under it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pytest import MonkeyPatch

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.entries import MemoryEntry
from memory_core.base.merge_values import ChangeKind
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.matching import EntryView
from memory_core.longterm.memory_md_renderer import render_memory

WHEN = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)


def hand_written(path: Path, *contents: str) -> list[str]:
    """A MEMORY.md a person wrote, dated an hour back; the ids of its entries."""
    entries = [
        MemoryEntry(f"hand{n}", text, "fact", 0.6, WHEN, WHEN, WHEN)
        for n, text in enumerate(contents)
    ]
    path.write_text(render_memory(entries, now=WHEN), encoding="utf-8")
    past = time.time() - 3600
    os.utime(path, (past, past))
    return [e.id for e in entries]


async def test_the_first_capture_reads_nothing_the_open_did_not(
    config: Config, clock: ManualClock, monotonic: ManualMonotonic
) -> None:
    hand_written(config.workspace_path / "MEMORY.md", "likes green tea", "lives in Hangzhou")
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        await core.finder.search(MAIN, "green tea")
        await core.memories.warmed()
        reads = core.memories.store.files.reads
        read_at_open = reads.parsed_blocks
        assert read_at_open == 2
        _, result = await core.memories.capture(MAIN, "works at the Hangzhou office")
        assert result.count(ChangeKind.ADDED) == 1
        assert reads.parsed_blocks == read_at_open


async def test_a_hand_edit_after_the_open_is_what_the_first_capture_meets(
    config: Config, clock: ManualClock, monotonic: ManualMonotonic
) -> None:
    path = config.workspace_path / "MEMORY.md"
    hand_written(path, "lives in Hangzhou")
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        await core.finder.search(MAIN, "Hangzhou")
        await core.memories.warmed()
        # The bot runs; a person adds a memory by hand, and later the user says it again.
        [_, tea] = hand_written(path, "lives in Hangzhou", "likes green tea")
        monotonic.advance(5)
        entry, result = await core.memories.capture(MAIN, "Likes green tea!")
        assert (result.count(ChangeKind.REINFORCED), entry.id) == (1, tea)


async def test_a_file_that_cannot_be_read_does_not_stop_the_open(
    config: Config, clock: ManualClock
) -> None:
    path = config.workspace_path / "MEMORY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()  # a directory where the file should be: its first use says so
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.warmed()
        assert core.memories.path(MAIN).is_dir()


async def test_the_view_is_built_off_the_event_loop(
    config: Config, clock: ManualClock, monotonic: ManualMonotonic, monkeypatch: MonkeyPatch
) -> None:
    """Making a large file's view and grouping it take a fraction of a second per 100 000
    entries: the open (and a capture that rebuilds it) does both in worker threads, so a
    bot's event loop keeps answering meanwhile."""
    hand_written(config.workspace_path / "MEMORY.md", "likes green tea", "lives in Hangzhou")
    threads: list[str] = []
    make, ready = EntryView.of.__func__, EntryView.ready  # type: ignore[attr-defined]

    def of(cls: type[EntryView], entries: Iterable[MemoryEntry]) -> EntryView:
        threads.append(threading.current_thread().name)
        return make(cls, entries)  # type: ignore[no-any-return]

    def grouped(view: EntryView) -> EntryView:
        threads.append(threading.current_thread().name)
        return ready(view)

    monkeypatch.setattr(EntryView, "of", classmethod(of))
    monkeypatch.setattr(EntryView, "ready", grouped)
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        await core.finder.search(MAIN, "green tea")
        await core.memories.warmed()
    assert len(threads) == 2
    assert threading.main_thread().name not in threads


async def test_neither_the_open_nor_the_first_search_waits_for_the_read_ahead(
    config: Config, clock: ManualClock, monkeypatch: MonkeyPatch
) -> None:
    """On a large file the read-ahead holds the interpreter for a second: it starts once
    the first search is answered, and a command's core (one capture, one search) reads
    nothing ahead at all."""
    hand_written(config.workspace_path / "MEMORY.md", "likes green tea")
    release, started, finished = threading.Event(), threading.Event(), threading.Event()
    make = EntryView.of.__func__  # type: ignore[attr-defined]

    def slow(cls: type[EntryView], entries: Iterable[MemoryEntry]) -> EntryView:
        started.set()
        release.wait(10)
        finished.set()
        return make(cls, entries)  # type: ignore[no-any-return]

    monkeypatch.setattr(EntryView, "of", classmethod(slow))
    async with MemoryCore.open(config, clock=clock) as core:
        assert not started.is_set()  # nothing read ahead by the open
        await core.finder.search(MAIN, "green tea")
        assert not finished.is_set()  # the search was answered without it
        release.set()
        await core.memories.warmed()
        assert finished.is_set()
    started.clear()
    async with MemoryCore.open(config, clock=clock, serving=False) as core:
        await core.finder.search(MAIN, "green tea")
        await core.memories.warmed()
    assert not started.is_set()  # no capture view was built
