"""Scope summaries made where the index reads the files (recall/index/summaries.py): after
a reindex, or a sync that read a scope's long-term file, `chatmem scopes` and `stats`
read no file, and every summary is exactly the one the listing makes of the same files
(same stamp, same payload). Files just written, or not all UTF-8, are left to the
listing, as before."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

import memory_core.scope_listing.listing as listing
from adapters.cli.commands import Stats
from adapters.cli.scopes import Scopes
from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason, MemoryClass, MemoryEntry
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.long_term import LongTermMemory
from memory_core.storage import summary_format
from tests.unit.test_scopes_from_summaries import PEERS, fill, old_scopes, old_stats, settle

pytestmark = pytest.mark.storage

NOTES_ONLY = ScopeKey("peer:notes")
"""A scope with daily notes and no long-term file."""
T = TypeVar("T")
BAD_BLOCK = "\n### [bad1] fact | lots | 2026-01-01 | 1\nby hand\n"


async def fill_more(core: MemoryCore) -> None:
    """`fill`'s scopes (categories, classes, an archived entry, daily notes), with a
    quarantined block, a scope of notes only, and a file the listing counts as a daily
    file though no day has that date."""
    await fill(core)
    await core.notes.append(NOTES_ONLY, "only a note here")
    await core.memories.flush()
    ws = core.workspace
    path = ws.long_term_path(PEERS[0])
    path.write_text(path.read_text(encoding="utf-8") + BAD_BLOCK, "utf-8")
    (ws.memory_dir(PEERS[0]) / "2026-02-30.md").write_text("# not a day\n", "utf-8")


def not_utf8(path: Path) -> None:
    """A block holding a byte that is no UTF-8 added to the file."""
    path.write_bytes(path.read_bytes() + b"\n### [x1] fact | 0.5 | 2026-01-01 | 1\n\xff\n")


def settle_all(core: MemoryCore) -> None:
    ws = core.workspace
    settle(ws.long_term_path(MAIN), ws.memory_dir(MAIN))


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scopes whose files a listing reads (its loader, patched)."""
    read: list[str] = []
    real = listing._summary

    async def spy(memories: LongTermMemory, scope: ScopeKey) -> str:
        read.append(scope.value)
        return await real(memories, scope)

    monkeypatch.setattr(listing, "_summary", spy)
    return read


async def run_json(core: MemoryCore, command: Any, capsys: pytest.CaptureFixture[str]) -> Any:
    args = argparse.Namespace(json=True, merge=None, limit=None, offset=0)
    capsys.readouterr()
    assert await command.run(core, args) == 0
    return json.loads(capsys.readouterr().out)


async def summaries(core: MemoryCore) -> dict[str, tuple[str, str]]:
    """key → (stamp, payload) of every summary held."""
    db = core._open.db
    assert db is not None

    def rows(conn: Any) -> dict[str, tuple[str, str]]:
        found = conn.execute("SELECT key, stamp, payload FROM scope_summaries")
        return {str(r[0]): (str(r[1]), str(r[2])) for r in found}

    return await db.read(rows)


async def listing_made(core: MemoryCore) -> dict[str, tuple[str, str]]:
    """The summaries the listing makes of the files as they are, none kept before."""
    db = core._open.db
    assert db is not None
    await db.write(lambda conn: conn.execute("DELETE FROM scope_summaries"))
    await core.scope_listing()
    return await summaries(core)


async def read_nothing(core: MemoryCore, read: list[str], listed: Callable[[], Awaitable[T]]) -> T:
    """`listed()`, asserting that it read no scope's file (its loader, and the store's
    read counters)."""
    counts = core.memories.store.files.reads
    before = (counts.parsed_blocks, counts.cache_reads)
    read.clear()
    got = await listed()
    assert read == []
    assert (counts.parsed_blocks, counts.cache_reads) == before
    return got


async def test_a_reindex_leaves_the_listings_own_summaries(
    config: Config,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = count_reads(monkeypatch)
    async with MemoryCore.open(config, clock=clock) as core:
        await fill_more(core)
    clock.advance(timedelta(days=2))
    async with MemoryCore.open(config, clock=clock) as core:
        settle_all(core)
        await core.reindex()
        made = await summaries(core)
        assert sorted(made) == sorted(s.value for s in [MAIN, *PEERS, NOTES_ONLY])
        stats = await read_nothing(core, read, lambda: run_json(core, Stats, capsys))
        assert stats == await old_stats(core)
        page = await read_nothing(core, read, lambda: run_json(core, Scopes, capsys))
        assert page == await old_scopes(core)
        by_scope = {row["scope"]: row for row in stats["scopes"]}
        assert by_scope[PEERS[0].value]["quarantined"] == 1
        assert by_scope[PEERS[0].value]["daily_files"] == 2  # a note and 2026-02-30.md
        assert by_scope[PEERS[2].value]["archived"] >= 1
        assert by_scope[NOTES_ONLY.value]["active"] == 0
        assert by_scope[NOTES_ONLY.value]["daily_files"] == 1
        # The very rows the listing makes of the same files: stamps and payloads.
        read.clear()
        assert await listing_made(core) == made
        assert sorted(read) == sorted(made)
        # And as of 40 days on (scores decayed, entries Archived): the same figures.
        clock.advance(timedelta(days=40))
        assert await read_nothing(core, read, lambda: run_json(core, Stats, capsys)) == (
            await old_stats(core)
        )


async def test_a_sync_that_reads_a_long_term_file_leaves_its_summary(
    config: Config,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = count_reads(monkeypatch)
    async with MemoryCore.open(config, clock=clock) as core:
        await fill_more(core)
        settle_all(core)
        await core.scope_listing()  # every summary made, by the listing
    # Another program edits two long-term files while nothing runs.
    ws = core.workspace
    for scope in PEERS[1:3]:
        path = ws.long_term_path(scope)
        path.write_text(path.read_text(encoding="utf-8") + BAD_BLOCK, "utf-8")
        settle(path)
    async with MemoryCore.open(config, clock=clock) as core:
        # A search syncs its scope (the file compared entry by entry)...
        await core.finder.search(PEERS[1], "tea")
        # ...and a forced sync reads the whole file (`chatmem scopes --merge` does).
        index = core.guard.index
        assert index is not None
        await index.sync_scope(PEERS[2], force=True)
        stats = await read_nothing(core, read, lambda: run_json(core, Stats, capsys))
        assert stats == await old_stats(core)
        by_scope = {row["scope"]: row for row in stats["scopes"]}
        assert by_scope[PEERS[1].value]["quarantined"] == 1
        assert by_scope[PEERS[2].value]["quarantined"] == 1
        made = await summaries(core)
        assert await listing_made(core) == made


async def test_files_just_written_or_not_utf8_are_left_to_the_listing(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summary of files written within the racy window is kept under a stamp no file
    has; a long-term file that is not all UTF-8 is read by the store (which quarantines
    its blocks and keeps a copy), never summarized from a reindex's read of it."""
    read = count_reads(monkeypatch)
    async with MemoryCore.open(config, clock=clock) as core:
        await fill_more(core)
        ws = core.workspace
        not_utf8(ws.long_term_path(PEERS[3]))
        settle_all(core)
        await core.reindex()
        await core.scope_listing()
        assert read == [PEERS[3].value]
        # Another program writes a file just before the reindex: racy.
        path = ws.long_term_path(PEERS[0])
        path.write_text(path.read_text(encoding="utf-8") + "\n", "utf-8")
        await core.reindex()
        read.clear()
        await core.scope_listing()
        assert read == [PEERS[0].value, PEERS[3].value]


def test_a_payload_is_the_json_of_its_fields() -> None:
    """The payload is put together from the entries' JSON (made by a reindex's worker)
    and the counts: the very bytes `json.dumps` makes of the whole object, so summaries
    stored before read the same."""
    when = datetime(2026, 3, 1, tzinfo=UTC)
    entries = [
        MemoryEntry("a1", "x", "fact", 0.5, when, when, when),
        MemoryEntry(
            "a2",
            "y",
            "preference",
            0.1,
            when,
            when,
            when,
            pinned=True,
            archived=ArchiveReason.MANUAL,
            memory_class=MemoryClass.EVENT,
        ),
    ]
    rows = json.loads(summary_format.entries_text(entries))
    whole = {"v": summary_format.SUMMARY_VERSION, "q": 3, "d": 12, "e": rows}
    assert summary_format.encode(entries, 3, 12) == json.dumps(whole, separators=(",", ":"))
    assert summary_format.readable(summary_format.encode([], 0, 0))
