"""The search index: incremental sync after hand edits, deletes and renames, chunk line
ranges, monthly summaries hiding daily ones, message chunks, filters, degraded mode and
repair, and agreement of the FTS5 index with rank-bm25 over the same tokens."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
import os
import random
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from adapters import cli
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock, ManualMonotonic, format_when
from memory_core.base.errors import ChatmemError, DatabaseUnwritable
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.text import tokenize
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index import K1, B, CorpusStats, Hit, SearchIndex, idf
from memory_core.recall.index import rebuild as index_rebuild
from memory_core.recall.index import search_index as sqlite_index
from memory_core.recall.index import writes as index_writes
from memory_core.recall.index.rerank import RankSettings, prior_factor
from testkit.reference_bm25 import ReferenceBM25
from tests.conftest import START
from tests.postgres import with_storage
from tests.support import (
    another_process_holds,
    bm25_score,
    chunk_counts,
    database,
    index_message,
    index_of,
    sql,
    sql_write,
)

pytestmark = pytest.mark.storage

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "recall_bilingual.json"
DAY = "memory/2026-03-01.md"
TODAY = START.date()


@pytest.fixture
def eager_config(config: Config) -> Config:
    """Search re-checks files on every call."""
    return config.model_copy(
        update={"recall": config.recall.model_copy(update={"sync_min_interval_seconds": 0.0})}
    )


@pytest.fixture
async def eager(eager_config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(eager_config, clock=clock) as core:
        yield core


def texts(hits: list[Hit]) -> list[str]:
    return [h.text for h in hits]


async def found(core: MemoryCore, query: str, scope: ScopeKey = MAIN, **kw: Any) -> list[str]:
    return texts(await core.finder.search(scope, query, limit=20, min_score=0.0, **kw))


async def chunk_rows(core: MemoryCore, scope: ScopeKey = MAIN) -> list[tuple[Any, ...]]:
    sid = await index_of(core).scope_id(scope)
    rows = await sql(
        core,
        "SELECT path, line_from, line_to, kind, text, tokens, hidden FROM chunks"
        " WHERE scope_id = ? ORDER BY path, line_from, text",
        sid,
    )
    return [tuple(r) for r in rows]


def write(core: MemoryCore, relative: str, text: str) -> Path:
    path = core.workspace.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def bump_mtime(path: Path) -> None:
    """Hand edits within one timestamp tick must still look changed to the sync."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


# --- incremental sync -------------------------------------------------------------------


async def test_hand_edits_are_picked_up_by_sync(core: MemoryCore) -> None:
    index = index_of(core)
    await core.notes.append(MAIN, "weekend plan: gardening with grandpa")
    entry, _ = await core.memories.capture(MAIN, "user likes jazz music on vinyl")
    summary = write(
        core, "memory/summary/2026-02-10.md", "# 2026-02-10\n\nbudget review went fine\n"
    )
    first = await index.sync_scope(MAIN)
    assert first.files_indexed == 1  # only the summary: the core indexed its own writes
    assert await found(core, "budget review") == ["budget review went fine"]

    daily = core.workspace.root / DAY
    daily.write_text(daily.read_text().replace("gardening", "woodworking"), encoding="utf-8")
    with summary.open("a", encoding="utf-8") as handle:
        handle.write("\nsecond paragraph: hiring plan for Q3\n")
    long_term = core.workspace.root / "MEMORY.md"
    long_term.write_text(
        long_term.read_text().replace("jazz music", "classical music"), encoding="utf-8"
    )
    for path in (daily, summary, long_term):
        bump_mtime(path)

    stats = await index.sync_scope(MAIN)
    assert (stats.files_seen, stats.files_indexed, stats.files_removed) == (3, 3, 0)
    assert await found(core, "woodworking") == ["weekend plan: woodworking with grandpa"]
    assert await found(core, "gardening") == []
    assert await found(core, "hiring") == ["second paragraph: hiring plan for Q3"]
    assert await found(core, "classical") == ["user likes classical music on vinyl"]
    assert await found(core, "jazz") == []
    # The edited entry keeps its id, so recall can still reinforce it.
    [hit] = await core.finder.search(MAIN, "classical vinyl")
    assert hit.ref == entry.id

    again = await index.sync_scope(MAIN)
    assert (again.files_seen, again.files_indexed, again.chunks_added) == (3, 0, 0)


async def test_unchanged_files_are_not_read(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = index_of(core)
    await core.notes.append(MAIN, "a note")
    await core.memories.capture(MAIN, "a memory")
    await core.memories.flush()
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nmonth\n")
    await index.sync_scope(MAIN)
    reads: list[Path] = []
    real = sqlite_index.prepare_file

    def counting(workspace: Any, path: Path, *rest: Any) -> Any:
        reads.append(path)
        return real(workspace, path, *rest)

    monkeypatch.setattr(sqlite_index, "prepare_file", counting)
    stats = await index.sync_scope(MAIN)
    assert (stats.files_seen, stats.files_indexed) == (3, 0)
    assert reads == []
    # Touched but not changed: read once to compare the hash, not re-indexed.
    bump_mtime(core.workspace.root / "memory/summary/2026-02.md")
    stats = await index.sync_scope(MAIN)
    assert (stats.files_indexed, stats.chunks_added, len(reads)) == (0, 0, 1)
    stats = await index.sync_scope(MAIN)
    assert (stats.files_indexed, len(reads)) == (0, 1)


async def test_search_itself_picks_up_edits(eager: MemoryCore) -> None:
    core = eager
    await core.notes.append(MAIN, "ordered a blue bicycle")
    assert await found(core, "bicycle") == ["ordered a blue bicycle"]
    daily = core.workspace.root / DAY
    daily.write_text(daily.read_text().replace("blue bicycle", "red scooter"), encoding="utf-8")
    bump_mtime(daily)
    assert await found(core, "bicycle") == []  # no explicit sync
    assert await found(core, "scooter") == ["ordered a red scooter"]


async def test_search_waits_for_the_sync_interval(
    config: Config, clock: ManualClock, monotonic: ManualMonotonic
) -> None:
    assert config.recall.sync_min_interval_seconds == 2.0  # the default
    lazy = config.model_copy(
        update={"recall": config.recall.model_copy(update={"sync_min_interval_seconds": 3600.0})}
    )
    async with MemoryCore.open(lazy, clock=clock, monotonic=monotonic) as core:
        await core.notes.append(MAIN, "ordered a blue bicycle")
        await core.finder.search(MAIN, "bicycle")  # syncs now, then at most once per interval
        write(core, "memory/2026-02-01.md", "- 10:00:00 a scooter arrived\n")
        assert await found(core, "scooter") == []  # within the interval: not checked yet
        # The core's own writes are indexed at once, whatever the interval.
        await core.notes.append(MAIN, "a helmet too")
        assert await found(core, "helmet") == ["a helmet too"]
        monotonic.advance(3600.0 - 1)
        assert await found(core, "scooter") == []  # a second short of the interval
        monotonic.advance(1)
        assert await found(core, "scooter") == ["a scooter arrived"]


async def test_deletes_and_renames(eager: MemoryCore) -> None:
    core = eager
    index = index_of(core)
    await core.notes.append(MAIN, "the plumber comes on Tuesday", now=START - timedelta(days=1))
    write(core, "memory/summary/2026-02-10.md", "# 2026-02-10\n\nkayak trip planned\n")
    write(core, "memory/2026-02-01-chat-export.md", "raw history about the tax refund\n")
    await index.sync_scope(MAIN)
    assert await found(core, "plumber") == ["the plumber comes on Tuesday"]

    (core.workspace.root / "memory/2026-02-28.md").unlink()
    stats = await index.sync_scope(MAIN)
    assert (stats.files_removed, stats.chunks_removed) == (1, 1)
    assert await found(core, "plumber") == []
    assert (await chunk_counts(core, MAIN)).get("daily") is None

    old = core.workspace.root / "memory/summary/2026-02-10.md"
    old.rename(old.with_name("2026-02-11.md"))
    raw = core.workspace.root / "memory/2026-02-01-chat-export.md"
    raw.rename(raw.with_name("2026-02-02-chat-export.md"))
    hits = await core.finder.search(MAIN, "kayak tax refund", limit=5, min_score=0.0)
    assert sorted((h.path, h.kind.value) for h in hits) == [
        ("memory/2026-02-02-chat-export.md", "archive_raw"),
        ("memory/summary/2026-02-11.md", "summary"),
    ]
    paths = {row[0] for row in await chunk_rows(core)}
    assert paths == {"memory/summary/2026-02-11.md", "memory/2026-02-02-chat-export.md"}
    assert (await index.sync_scope(MAIN)).files_indexed == 0


async def test_hand_edit_then_append_keeps_both(eager: MemoryCore) -> None:
    """An append after an unsynced hand edit must not hide the edit from the index."""
    core = eager
    index = index_of(core)
    await core.notes.append(MAIN, "first note about apples")
    daily = core.workspace.root / DAY
    daily.write_text(daily.read_text().replace("apples", "bananas"), encoding="utf-8")
    await core.notes.append(MAIN, "second note about cherries")
    await index.sync_scope(MAIN)
    assert await found(core, "bananas") == ["first note about bananas"]
    assert await found(core, "apples") == []
    assert await found(core, "cherries") == ["second note about cherries"]


async def test_removing_an_appended_note_by_hand(core: MemoryCore) -> None:
    """The file returns to content the index once hashed: the note must still go."""
    index = index_of(core)
    original = "# 2026-03-01\n\n- 08:00:00 breakfast with Carol\n"
    daily = write(core, DAY, original)
    await index.sync_scope(MAIN)
    await core.notes.append(MAIN, "call the landlord about the heater")
    assert await found(core, "landlord") == ["call the landlord about the heater"]
    daily.write_text(original, encoding="utf-8")
    bump_mtime(daily)
    await index.sync_scope(MAIN)
    assert await found(core, "landlord") == []
    assert await found(core, "breakfast") == ["breakfast with Carol"]


async def test_appends_index_like_a_full_sync(core: MemoryCore) -> None:
    """Chunks added note by note equal the chunks of reading the files from scratch."""
    peer = ScopeKey("peer:9")
    for scope in (MAIN, peer):
        await core.notes.append(scope, "single line note")
        await core.notes.append(scope, "multi line note\nsecond line\n\n  third line indented")
        await core.notes.append(scope, "中文笔记：明天去杭州出差")
        await core.notes.append(scope, "yesterday's note", now=START - timedelta(days=1))
    for scope in (MAIN, peer):
        incremental = await chunk_rows(core, scope)
        stats = await index_of(core).sync_scope(scope, force=True)
        assert stats.files_indexed == 2
        # Text too: an appended note's chunk reads like the file's (continuation lines
        # stripped).
        assert await chunk_rows(core, scope) == incremental


REBUILD_QUERIES = ["apples", "kayak", "locker code", "杭州 出差", "jazz vinyl", "note", "plan"]


async def index_state(core: MemoryCore, scopes: list[ScopeKey]) -> dict[str, Any]:
    """Everything a search depends on, per scope, without ids or content hashes (an
    append forgets the hash; a rebuild computes it)."""
    index = index_of(core)
    state: dict[str, Any] = {}
    for scope in scopes:
        sid = await index.scope_id(scope)
        rows = await sql(
            core,
            "SELECT path, line_from, line_to, kind, created_at, ref, hidden, text, tokens"
            " FROM chunks WHERE scope_id = ? ORDER BY path, line_from, text",
            sid,
        )
        terms = await sql(core, "SELECT term, df FROM terms WHERE scope_id = ? ORDER BY term", sid)
        counts = await sql(core, "SELECT chunk_count, token_count FROM scopes WHERE id = ?", sid)
        hits = {}
        for query in REBUILD_QUERIES:
            found_hits = await index.search(scope, query, limit=50)
            hits[query] = sorted(
                (round(-h.score, 9), h.path, h.line_from, h.text) for h in found_hits
            )
        state[scope.value] = {
            "chunks": [tuple(r) for r in rows],
            "terms": [tuple(r) for r in terms],
            "counts": [tuple(r) for r in counts],
            "hits": hits,
        }
    files = await sql(core, "SELECT path, mtime_ns, size, kind FROM files ORDER BY path")
    state["files"] = [tuple(r) for r in files]
    return state


@pytest.mark.parametrize("group", [64, 2], ids=["threads", "processes"])
async def test_rebuild_equals_the_incremental_index(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    """A rebuild (in worker processes when there are enough groups of files) leaves
    exactly the chunks, frequencies, counters and search results that appends, long-term
    writes, syncs and messages built one by one."""
    index = index_of(core)
    peer, talk_only = ScopeKey("peer:9"), ScopeKey("peer:talk-only")
    for scope in (MAIN, peer):
        await core.notes.append(scope, "first note about apples")
        await core.notes.append(scope, "multi line note\nsecond line\n\n  third line indented")
        await core.notes.append(scope, "中文笔记：明天去杭州出差")
        for days in range(1, 6):
            await core.notes.append(
                scope, f"note {days} days ago: plan", now=START - timedelta(days=days)
            )
        await core.memories.capture(scope, "user likes jazz music on vinyl")
    await core.memories.flush()
    write(core, "memory/summary/2026-02-03.md", "# 2026-02-03\n\nkayak lesson at the lake\n")
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nFebruary: kayak and paddling\n")
    write(core, "memory/2026-02-01-chat-export.md", "# export\n\nkayak tax refund\n\nmore plan\n")
    await index.sync_scope(MAIN)
    when = START - timedelta(hours=2)
    await index_message(core, MAIN, "sess-1", 7, "user", "my locker code is 4512", when)
    await index_message(
        core, talk_only, "sess-2", 3, "user", "locker code of a scope without files", when
    )
    scopes = [MAIN, peer, talk_only]
    incremental = await index_state(core, scopes)
    assert incremental[MAIN.value]["hits"]["kayak"]  # the comparison is not vacuous

    monkeypatch.setattr(index_rebuild, "REBUILD_GROUP", group)
    progress: list[tuple[int, int]] = []
    stats = await index.rebuild(lambda done, total: progress.append((done, total)))
    files = len(incremental["files"])
    assert (stats.files_seen, stats.files_indexed) == (files, files)
    assert stats.chunks_added == sum(
        1 for s in (MAIN, peer) for r in incremental[s.value]["chunks"] if r[3] != "message"
    )
    assert progress[-1] == (files, files)
    assert await index_state(core, scopes) == incremental
    for scope in scopes:
        sid = await index.scope_id(scope)
        if database(core).dialect.name == "sqlite":
            # FTS5's own consistency check of its index (not against the content table,
            # which every scope's FTS table shares).
            await sql(core, f"INSERT INTO fts_{sid} (fts_{sid}) VALUES ('integrity-check')")
    # A second rebuild of the rebuilt index changes nothing either.
    await index.rebuild()
    assert await index_state(core, scopes) == incremental


async def test_an_append_waits_for_another_process_holding_the_file(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process holds the daily file's lock, the one-trip append backs off
    (nothing written, nothing indexed) and waits for the lock in a worker thread."""
    await core.notes.append(MAIN, "first note about apples")
    name = core.workspace.lock_name(MAIN, "daily")
    process = core.notes.locks.process
    waiting = threading.Event()
    take = process.take

    def watched_take(lock: str) -> object:
        if lock == name:
            waiting.set()
        return take(lock)

    monkeypatch.setattr(process, "take", watched_take)
    async with another_process_holds(core, name):
        appending = asyncio.ensure_future(core.notes.append(MAIN, "second note about cherries"))
        assert await asyncio.to_thread(waiting.wait, 10), "the append never waited for the lock"
        assert not appending.done()
        assert "cherries" not in (core.workspace.root / DAY).read_text(encoding="utf-8")
    assert await appending == (DAY, 4)
    assert texts(await index_of(core).search(MAIN, "cherries")) == ["second note about cherries"]
    stats = await index_of(core).sync_scope(MAIN)
    assert stats.files_indexed == 0  # the waiting path indexed it as a sync would


async def test_failed_index_write_of_an_append_is_picked_up_by_the_next_sync(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note is in the file before the index is written; when that write fails, none
    of it stays, and the file's old stamp makes the next sync read the file again."""
    index = index_of(core)

    async def rows_of(index: SearchIndex) -> list[tuple[Any, ...]]:
        sid = await index.scope_id(MAIN)
        rows = await sql(
            core,
            "SELECT path, line_from, line_to, kind, text, tokens FROM chunks"
            " WHERE scope_id = ? ORDER BY path, line_from",
            sid,
        )
        return [tuple(r) for r in rows]

    await core.notes.append(MAIN, "first note about apples")
    real = index_writes.insert_chunks

    def failing(*args: Any) -> None:
        real(*args)  # the rows are written, then the transaction fails
        raise DatabaseUnwritable("disk I/O error")

    monkeypatch.setattr(index_writes, "insert_chunks", failing)
    assert await core.notes.append(MAIN, "second note about cherries") == (DAY, 4)
    monkeypatch.undo()
    assert core.guard.index is None  # degraded: searches read the files
    assert "second note about cherries" in (core.workspace.root / DAY).read_text()
    assert texts(await core.finder.search(MAIN, "cherries")) == ["second note about cherries"]
    assert await index.search(MAIN, "cherries") == []  # rolled back
    assert [r[4] for r in await rows_of(index)] == ["first note about apples"]

    stats = await index.sync_scope(MAIN)
    assert (stats.files_indexed, stats.chunks_added) == (1, 2)
    assert texts(await index.search(MAIN, "cherries")) == ["second note about cherries"]
    counts = await sql(core, "SELECT chunk_count FROM scopes WHERE key = ?", MAIN.value)
    assert [tuple(r) for r in counts] == [(2,)]
    synced = await rows_of(index)
    assert [r[4] for r in synced] == ["first note about apples", "second note about cherries"]
    await index.sync_scope(MAIN, force=True)
    assert await rows_of(index) == synced


def test_rebuild_formats_times_like_format_when() -> None:
    """The rebuild's quick timestamp text must equal `format_when` for every input."""
    zone = timezone(timedelta(hours=8))
    for when in (
        datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC),
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 0, 0, tzinfo=zone),
        datetime(2026, 3, 1, 12, 0, 0),
    ):
        assert index_rebuild.when_text(when) == format_when(when), when


# --- line ranges ------------------------------------------------------------------------


async def assert_chunks_match_files(core: MemoryCore, scope: ScopeKey = MAIN) -> int:
    """Every file chunk's terms are in the file's lines line_from..line_to."""
    checked = 0
    for path, line_from, line_to, _, text, tokens, _ in await chunk_rows(core, scope):
        if path.startswith("sessions/"):
            continue
        lines = (core.workspace.root / path).read_text(encoding="utf-8").splitlines()
        assert 1 <= line_from <= line_to <= len(lines), (path, line_from, line_to)
        window = "\n".join(lines[line_from - 1 : line_to])
        assert set(tokens.split()) <= set(tokenize(window)), (path, line_from, text)
        assert tokens == " ".join(tokenize(text))
        checked += 1
    return checked


async def test_line_ranges_point_into_the_files(core: MemoryCore) -> None:
    path, line = await core.notes.append(MAIN, "buy milk")
    assert (path, line) == (DAY, 3)
    path, line = await core.notes.append(MAIN, "meeting notes\nalice: ship it\nbob: agreed")
    assert line == 4
    [hit] = await core.finder.search(MAIN, "alice ship")
    assert (hit.path, hit.line_from, hit.line_to) == (DAY, 4, 6)
    read = await core.finder.read(MAIN, hit.location, lines=3)
    assert read.text.splitlines()[0].endswith("meeting notes")
    assert read.text.splitlines()[2] == "  bob: agreed"

    first, _ = await core.memories.capture(MAIN, "user's dog is called Biscuit")
    second, _ = await core.memories.capture(
        MAIN, "user works at a bakery\nsince 2019, night shifts"
    )
    await core.memories.flush()
    long_term = (core.workspace.root / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    for entry in (first, second):
        [hit] = await core.finder.search(MAIN, entry.content.split()[-1])
        assert long_term[hit.line_from - 1].startswith(f"### [{entry.id}]")
        assert long_term[hit.line_to - 1] == entry.content.splitlines()[-1]
        assert hit.ref == entry.id
        read = await core.finder.read(MAIN, f"[{hit.location}]", lines=1)
        assert read.text.startswith(f"### [{entry.id}]")

    write(
        core,
        "memory/summary/2026-02.md",
        "# February 2026\n"
        "\n"
        "## Work\n"
        "Shipped the billing rewrite.\n"
        "Postmortem for the outage.\n"
        "\n"
        "\n"
        "## Home\n"
        "Painted the kitchen.\n",
    )
    await index_of(core).sync_scope(MAIN)
    for query, expected in (
        ("billing rewrite", (3, 5)),
        ("postmortem outage", (3, 5)),
        ("painted kitchen", (8, 9)),
        ("february", (1, 1)),
    ):
        [hit] = await core.finder.search(MAIN, query, kinds=[ChunkKind.SUMMARY], min_score=0.0)
        assert (hit.line_from, hit.line_to) == expected, query
    assert await assert_chunks_match_files(core) == 7


async def test_line_ranges_after_hand_written_notes(core: MemoryCore) -> None:
    write(
        core,
        "memory/2026-02-20.md",
        "# 2026-02-20\n"
        "\n"
        "- 09:15:00 standup moved to 9:30\n"
        "  continuation about the room\n"
        "free text line written by hand\n"
        "\n"
        "- 18:00 dinner at the night market\n",
    )
    await index_of(core).sync_scope(MAIN)
    hits = {
        h.text: h
        for h in await core.finder.search(MAIN, "standup room hand dinner market", min_score=0.0)
    }
    assert {k: (v.line_from, v.line_to) for k, v in hits.items()} == {
        "standup moved to 9:30\ncontinuation about the room": (3, 4),
        "free text line written by hand": (5, 5),
        "dinner at the night market": (7, 7),
    }
    assert hits["dinner at the night market"].created_at == datetime(2026, 2, 20, 18, tzinfo=UTC)
    assert hits["free text line written by hand"].created_at == datetime(2026, 2, 20, tzinfo=UTC)
    assert await assert_chunks_match_files(core) == 3


# --- monthly summaries hide daily summaries ---------------------------------------------


async def test_monthly_summary_hides_daily_summaries(eager: MemoryCore) -> None:
    core = eager
    write(core, "memory/summary/2026-02-03.md", "# 2026-02-03\n\nkayak lesson at the lake\n")
    write(core, "memory/summary/2026-01-15.md", "# 2026-01-15\n\nkayak bought in January\n")
    peer = ScopeKey("peer:5")
    core.workspace.ensure_scope(peer)
    write(
        core,
        core.workspace.relative(core.workspace.summary_dir(peer) / "2026-02-04.md"),
        "# 2026-02-04\n\nkayak rental for the peer\n",
    )
    both = ["kayak bought in January", "kayak lesson at the lake"]
    assert sorted(await found(core, "kayak")) == both

    monthly = write(core, "memory/summary/2026-02.md", "# 2026-02\n\nFebruary: paddling\n")
    assert await found(core, "kayak") == ["kayak bought in January"]
    assert await found(core, "paddling") == ["February: paddling"]
    assert texts(fallback.search_files(core.workspace, MAIN, "kayak")) == [
        "kayak bought in January"
    ]
    # Another scope's monthly-less daily summary is not touched.
    assert await found(core, "kayak", peer) == ["kayak rental for the peer"]

    monthly.unlink()
    assert sorted(await found(core, "kayak")) == both
    assert sorted(texts(fallback.search_files(core.workspace, MAIN, "kayak"))) == both

    # Written by the core (sync_file), the monthly summary hides them at once too.
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nFebruary again\n")
    await index_of(core).sync_file(MAIN, "memory/summary/2026-02.md")
    hidden = [r for r in await chunk_rows(core) if r[6]]
    assert [(r[0], r[4]) for r in hidden] == [
        ("memory/summary/2026-02-03.md", "# 2026-02-03"),
        ("memory/summary/2026-02-03.md", "kayak lesson at the lake"),
    ]


# --- message chunks ---------------------------------------------------------------------

EXCHANGE = "user: my locker code is 4512 at the gym\nassistant: Noted, locker 4512."


async def test_message_chunks_searchable_and_readable_in_their_scope(core: MemoryCore) -> None:
    index = index_of(core)
    peer = ScopeKey("peer:8")
    when = START - timedelta(hours=2)
    await index_message(core, MAIN, "sess-1", 7, "user", "my locker code is 4512 at the gym", when)
    await index_message(core, MAIN, "sess-1", 8, "assistant", "Noted, locker 4512.", when)
    await index_message(core, peer, "sess-1", 7, "user", "peer talks about swimming", when)
    await core.notes.append(MAIN, "went to the gym")

    # A turn is found with the turn next to it: the exchange, not the lone line. The
    # reply, shown inside that hit, is not a hit of its own.
    [hit] = await core.finder.search(MAIN, "code", kinds=[ChunkKind.MESSAGE])
    assert (hit.kind, hit.path, hit.line_from, hit.line_to, hit.ref) == (
        ChunkKind.MESSAGE,
        "sessions/sess-1",
        7,
        8,
        "7",
    )
    assert hit.text == EXCHANGE
    assert hit.created_at == when
    assert hit.location == "sessions/sess-1:7"
    kinds = {h.kind for h in await core.finder.search(MAIN, "gym", min_score=0.0)}
    assert kinds == {ChunkKind.MESSAGE, ChunkKind.DAILY}
    assert await core.finder.search(MAIN, "gym", kinds=[ChunkKind.LONG_TERM]) == []

    read = await core.finder.read(MAIN, "sessions/sess-1:7")
    assert (
        read.text
        == "[7] user: my locker code is 4512 at the gym\n[8] assistant: Noted, locker 4512."
    )
    assert (read.start, read.end, read.truncated) == (7, 8, False)
    one = await core.finder.read(MAIN, "[sessions/sess-1:7]", lines=1)
    assert (one.text, one.truncated) == ("[7] user: my locker code is 4512 at the gym", True)
    # The peer's session of the same id holds only its own message.
    assert (await core.finder.read(peer, "sessions/sess-1:7")).text == (
        "[7] user: peer talks about swimming"
    )
    with pytest.raises(ChatmemError):
        await core.finder.read(peer, "sessions/sess-1:8")
    with pytest.raises(ChatmemError):
        await core.finder.read(ScopeKey("peer:404"), "sessions/sess-1:7")
    assert await core.finder.search(peer, "locker") == []

    # Messages survive a sync and a rebuild (they have no file).
    await index.sync_scope(MAIN, force=True)
    await index.rebuild()
    assert texts(await core.finder.search(MAIN, "code", kinds=[ChunkKind.MESSAGE])) == [EXCHANGE]
    await index.remove_messages(MAIN, [7, 8])
    assert await core.finder.search(MAIN, "locker", min_score=0.0) == []


# --- filters ----------------------------------------------------------------------------


async def test_kinds_since_until_and_min_score(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "espresso machine descaling every month")
    for days in (10, 3, 1, 0):
        await core.notes.append(
            MAIN, f"espresso tasting day minus {days}", now=START - timedelta(days=days)
        )
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nespresso habit grew\n")
    write(core, "memory/2026-02-27-export.md", "raw: espresso talk\n")
    await index_of(core).sync_scope(MAIN)

    async def kinds_of(**kw: Any) -> Counter[str]:
        hits = await core.finder.search(MAIN, "espresso", limit=20, min_score=0.0, **kw)
        return Counter(h.kind.value for h in hits)

    assert await kinds_of() == Counter({"daily": 4, "long_term": 1, "summary": 1, "archive_raw": 1})
    assert await kinds_of(kinds=[ChunkKind.DAILY]) == Counter({"daily": 4})
    assert await kinds_of(kinds=[ChunkKind.SUMMARY, ChunkKind.ARCHIVE_RAW]) == Counter(
        {"summary": 1, "archive_raw": 1}
    )
    assert await kinds_of(kinds=["long_term"]) == Counter({"long_term": 1})
    assert await kinds_of(kinds=[]) == Counter()

    since = START - timedelta(days=3)
    dated = await core.finder.search(MAIN, "espresso", limit=20, min_score=0.0, since=since)
    assert all(h.created_at is not None and h.created_at >= since for h in dated)
    assert sorted(h.text for h in dated if h.kind is ChunkKind.DAILY) == [
        "espresso tasting day minus 0",
        "espresso tasting day minus 1",
        "espresso tasting day minus 3",  # since is inclusive
    ]
    until = START - timedelta(days=1)
    window = await core.finder.search(
        MAIN, "espresso", limit=20, min_score=0.0, since=since, until=until
    )
    # until is exclusive: the note of exactly one day ago is out.
    assert sorted(texts(window)) == ["espresso tasting day minus 3", "raw: espresso talk"]
    old = await core.finder.search(
        MAIN, "espresso", limit=20, min_score=0.0, until=date_start(2026, 2, 25)
    )
    assert sorted(texts(old)) == ["espresso habit grew", "espresso tasting day minus 10"]

    everything = await core.finder.search(MAIN, "espresso descaling", limit=20, min_score=0.0)
    best = everything[0]
    assert best.text == "espresso machine descaling every month"
    # min_score bounds the BM25 evidence, before the priors lift or cut a hit: the best
    # hit's is its score without its long-term and recency lift.
    settings = index_of(core).rank_settings
    lifted = prior_factor(best.kind, best.created_at, START.date(), UTC, settings)
    assert lifted > 1.0
    evidence = best.score / lifted
    assert texts(
        await core.finder.search(MAIN, "espresso descaling", min_score=evidence - 1e-9)
    ) == [best.text]
    assert await core.finder.search(MAIN, "espresso descaling", min_score=evidence + 1e-9) == []
    assert await core.finder.search(MAIN, "espresso descaling", min_score=best.score) == []
    # Explicit searches show every match; only automatic recall applies recall.min_score.
    assert await core.finder.search(MAIN, "espresso descaling", limit=20) == everything
    assert len(await core.finder.search(MAIN, "espresso", limit=2)) <= 2
    assert await core.finder.search(MAIN, "espresso", limit=0) == []


def date_start(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


async def test_degraded_time_window_sees_past_the_top_hits(core: MemoryCore) -> None:
    """With the index down, since/until filter every hit before the limit applies: the
    best hits here are older than the window and must not crowd out the ones inside."""
    for number in range(20):
        await core.notes.append(MAIN, f"unrelated chore {number}", now=START - timedelta(days=20))
    for days in range(5, 11):
        text = f"postgres postgres vacuum {days}" if days > 6 else f"postgres note {days}"
        await core.notes.append(MAIN, text, now=START - timedelta(days=days))
    unfiltered = await core.finder.search(MAIN, "postgres", limit=2, min_score=0.0)
    assert all("vacuum" in h.text for h in unfiltered)  # the older notes score best
    since = START - timedelta(days=6, hours=12)
    healthy = await core.finder.search(MAIN, "postgres", limit=2, since=since, min_score=0.0)
    assert sorted(texts(healthy)) == ["postgres note 5", "postgres note 6"]
    until = START - timedelta(days=8, hours=12)
    healthy_old = await core.finder.search(MAIN, "postgres", limit=1, until=until, min_score=0.0)
    assert texts(healthy_old) == ["postgres postgres vacuum 9"]  # the newer of the two
    core.guard.index = None
    degraded = await core.finder.search(MAIN, "postgres", limit=2, since=since, min_score=0.0)
    assert_same_hits(degraded, healthy)
    old = await core.finder.search(MAIN, "postgres", limit=1, until=until, min_score=0.0)
    assert_same_hits(old, healthy_old)


def assert_same_hits(got: list[Hit], want: list[Hit]) -> None:
    """Same chunks in the same order; scores equal up to summation order."""
    assert [(h.path, h.line_from, h.text) for h in got] == [
        (h.path, h.line_from, h.text) for h in want
    ]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-12)


async def test_degraded_time_window_applies_before_near_copies_are_dropped(
    core: MemoryCore,
) -> None:
    """The same note on two days: the index filters by time first, then drops near-copies;
    the files must find the same hit."""
    for number in range(6):
        await core.notes.append(MAIN, f"unrelated chore {number}", now=START - timedelta(days=9))
    for days in (2, 9):
        await core.notes.append(MAIN, "postgres vacuum full", now=START - timedelta(days=days))
    until = START - timedelta(days=5)
    healthy = await core.finder.search(MAIN, "postgres vacuum", until=until)
    assert [h.created_at for h in healthy] == [START - timedelta(days=9)]
    core.guard.index = None
    assert_same_hits(await core.finder.search(MAIN, "postgres vacuum", until=until), healthy)


async def test_daily_note_time_survives_a_resync_in_another_time_zone(
    config: Config, clock: ManualClock
) -> None:
    zoned = config.model_copy(update={"timezone": "Asia/Shanghai"})
    async with MemoryCore.open(zoned, clock=clock) as core:
        await core.notes.append(MAIN, "lantern festival dumplings")  # 20:00 in Shanghai
        window = {"since": START - timedelta(minutes=1), "until": START + timedelta(minutes=1)}
        assert await found(core, "dumplings", **window) == ["lantern festival dumplings"]
        await index_of(core).sync_scope(MAIN, force=True)
        [hit] = await core.finder.search(MAIN, "dumplings", min_score=0.0)
        assert hit.created_at == START
        assert await found(core, "dumplings", **window) == ["lantern festival dumplings"]


# --- degraded mode and repair -----------------------------------------------------------

QUERIES = ["ramen Alice", "postgres billing", "数据库连接池", "护照 passport", "kayak"]


async def build_small_workspace(core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "we picked postgres for the billing service")
    await core.memories.capture(MAIN, "护照八月到期，要记得续签 passport")
    await core.notes.append(
        MAIN, "lunch with Alice at the ramen place", now=START - timedelta(days=2)
    )
    await core.notes.append(MAIN, "订单系统的数据库连接池耗尽了")
    await core.notes.append(MAIN, "Alice moved to the platform team")
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\nkayak trip, ramen tour\n")
    await index_of(core).sync_scope(MAIN)


def corrupt(workspace: Path) -> Path:
    db = workspace / ".chatmem" / "index.sqlite3"
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    db.write_bytes(random.Random(5).randbytes(16384))
    return db


@pytest.mark.sqlite_only
async def test_corrupt_index_degrades_to_files_and_reindex_repairs(
    config: Config, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await build_small_workspace(core)
        healthy = {q: await core.finder.search(MAIN, q, limit=3) for q in QUERIES}
    assert all(healthy.values())
    db = corrupt(Path(config.workspace))

    caplog.set_level(logging.INFO, logger="memory_core")
    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason is not None and "index.sqlite3" in core.degraded_reason
        assert core.guard.index is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert any("database unavailable" in r.getMessage() for r in warnings)
        caplog.clear()
        for query, expected in healthy.items():
            hits = await core.finder.search(MAIN, query, limit=3)
            assert hits, query
            assert (hits[0].path, hits[0].line_from, hits[0].text) == (
                expected[0].path,
                expected[0].line_from,
                expected[0].text,
            ), query
            assert [h.score for h in hits] == pytest.approx([h.score for h in expected], abs=1e-9)
        assert any("degraded search" in r.getMessage() for r in caplog.records)
        # Writing still works; reads of files too.
        await core.notes.append(MAIN, "note written while degraded: sourdough")
        assert texts(await core.finder.search(MAIN, "sourdough")) == [
            "note written while degraded: sourdough"
        ]
        assert (await core.finder.read(MAIN, DAY)).text.count("sourdough") == 1

        stats = await core.reindex()
        assert core.degraded_reason is None and core.guard.index is not None
        assert stats.files_indexed == 4
        aside = list(db.parent.glob("index.sqlite3.corrupt-*"))
        assert aside and aside[0].read_bytes() == random.Random(5).randbytes(16384)
        for query, expected in healthy.items():
            hits = await core.finder.search(MAIN, query, limit=3)
            assert texts(hits)[:1] == texts(expected)[:1]
        assert texts(await core.finder.search(MAIN, "sourdough")) == [
            "note written while degraded: sourdough"
        ]
        assert (await core.guard.index.sync_scope(MAIN)).files_indexed == 0
    async with MemoryCore.open(config, clock=clock) as core:
        assert core.degraded_reason is None
        assert texts(await core.finder.search(MAIN, "kayak", min_score=0.0)) == [
            "kayak trip, ramen tour"
        ]


async def test_index_failure_at_search_time_falls_back(core: MemoryCore) -> None:
    await build_small_workspace(core)
    expected = await core.finder.search(MAIN, "postgres billing")
    sid = await index_of(core).scope_id(MAIN)
    if database(core).dialect.name == "sqlite":
        await sql_write(core, (f"DROP TABLE fts_{sid}", ()))
    else:
        await sql_write(core, ("DROP FUNCTION chatmem_postings CASCADE", ()))
    hits = await core.finder.search(MAIN, "postgres billing")
    assert core.guard.index is None and core.degraded_reason is not None
    assert texts(hits) == texts(expected)


def test_cli_reindex_repairs_a_corrupt_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(tmp_path)  # no ./chatmem.toml
    monkeypatch.delenv("CHATMEM_WORKSPACE", raising=False)
    config = load_config(None, env=with_storage(), workspace=workspace)

    async def build() -> None:
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            await build_small_workspace(core)

    asyncio.run(build())
    db = corrupt(workspace)
    capsys.readouterr()
    assert cli.main(["search", "ramen", "--workspace", str(workspace)]) == 0
    out = capsys.readouterr().out
    assert "degraded" in out and "ramen" in out

    assert cli.main(["reindex", "--workspace", str(workspace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == 4 and report["chunks"] >= 5
    assert list(db.parent.glob("index.sqlite3.corrupt-*"))

    assert cli.main(["search", "postgres", "--workspace", str(workspace), "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["text"] for h in hits] == ["we picked postgres for the billing service"]
    assert cli.main(["reindex", "--workspace", str(workspace)]) == 0
    assert "reindexed 4 files" in capsys.readouterr().out


def _enter(request: pytest.FixtureRequest, context: Any) -> str:
    """Enter a context manager for the rest of the test."""
    value = context.__enter__()
    request.addfinalizer(lambda: context.__exit__(None, None, None))
    return str(value)


# --- BM25: the formula, FTS5 candidates vs rank-bm25 ------------------------------------


def test_bm25_formula() -> None:
    docs = [["tea", "green", "tea"], ["coffee", "black"], ["tea", "milk", "sugar", "ice"]]
    stats = CorpusStats(docs=3, avg_len=3.0, doc_freq={"tea": 2, "coffee": 1, "milk": 1})
    assert idf(3, 2) == pytest.approx(math.log(1 + 1.5 / 2.5))
    assert idf(1, 1) > 0 and idf(1000, 1000) > 0  # never zero or negative

    def by_hand(query: list[str], doc: list[str]) -> float:
        total = 0.0
        for term in set(query):
            tf = doc.count(term)
            if tf:
                n = stats.doc_freq[term]
                weight = math.log(1 + (3 - n + 0.5) / (n + 0.5))
                total += weight * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / 3.0))
        return total

    assert (K1, B) == (1.2, 0.75)
    for doc in docs:
        for query in (["tea"], ["tea", "milk"], ["coffee", "tea", "tea"]):
            assert bm25_score(query, doc, stats) == pytest.approx(by_hand(query, doc))
    reference = ReferenceBM25(docs, k1=K1, b=B)
    assert list(reference.get_scores(["tea", "milk"])) == pytest.approx(
        [bm25_score(["tea", "milk"], d, stats) for d in docs]
    )
    assert bm25_score(["tea"], [], stats) == 0.0


def load_bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "tokenizer_bench", ROOT / "bench" / "tokenizer_bench.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


BM25_ONLY = RankSettings(
    context_weights=(),
    recency_boost=0.0,
    long_term_boost=0.0,
    summary_factor=1.0,
    duplicate_similarity=1.01,
)
"""The ranking with every step after BM25 turned off: no neighbours, no priors, no
near-copy removal (a Jaccard above 1 is never reached)."""


async def test_fts5_candidates_agree_with_rank_bm25(core: MemoryCore) -> None:
    """A few thousand chunks: the index's top 10 are rank-bm25's top 10, same scores, when
    the steps after BM25 are off; with them on (the default), each score is that BM25
    score times its prior."""
    bench = load_bench()
    chunks = bench.make_chunks(bench.generate_sentences(6000))
    assert len(chunks) > 3000
    per_file = 150
    for start in range(0, len(chunks), per_file):
        day = date(2025, 1, 1) + timedelta(days=start // per_file)
        body = "".join(f"- 10:00:00 {text}\n" for text in chunks[start : start + per_file])
        write(core, f"memory/{day.isoformat()}.md", f"# {day.isoformat()}\n\n{body}")
    await index_of(core).sync_scope(MAIN)
    rows = await chunk_rows(core)
    assert len(rows) == len(chunks)
    corpus = [row[5].split() for row in rows]
    sample = random.Random(11)
    for row in sample.sample(rows, 50):
        assert row[5] == " ".join(tokenize(row[4]))  # the tokens are tokenize's
    reference = ReferenceBM25(corpus, k1=K1, b=B)
    df = Counter(term for doc in corpus for term in set(doc))
    common = 0.05 * len(corpus)
    bm25_only = SearchIndex(database(core), core.workspace, rank_settings=BM25_ONLY)
    default = index_of(core)
    today = START.date()

    compared = 0
    while compared < 50:
        doc = sample.choice(corpus)
        rare = [t for t in dict.fromkeys(doc) if df[t] <= common]
        if not rare:
            continue
        query = " ".join(sample.sample(rare, min(len(rare), sample.randint(1, 3))))
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or any(df[t] > common for t in terms):
            continue
        compared += 1
        # The terms as they are: a text query would drop question words and time words.
        hits = await bm25_only.search(MAIN, terms, limit=10, today=today)
        scores = reference.get_scores(terms)
        ranked = sorted(range(len(rows)), key=lambda i: -scores[i])
        top = [i for i in ranked[:10] if scores[i] > 0]
        assert len(hits) == len(top), query
        assert [h.score for h in hits] == pytest.approx([scores[i] for i in top], abs=1e-6), query
        # Same chunks, up to ties at the cut: every chunk scoring above the 10th is in both.
        cut = scores[top[-1]] + 1e-9
        by_location = {(row[0], row[1]): i for i, row in enumerate(rows)}
        got = Counter(h.text for h in hits if h.score > cut)
        want = Counter(rows[i][4] for i in top if scores[i] > cut)
        assert got == want, query
        for hit in hits:
            assert hit.score == pytest.approx(
                scores[by_location[(hit.path, hit.line_from)]], abs=1e-6
            )
        for hit in await default.search(MAIN, terms, limit=10, today=today):
            prior = prior_factor(hit.kind, hit.created_at, today, UTC, default.rank_settings)
            assert 1.0 < prior < 1.0 + default.rank_settings.recency_boost
            assert hit.score == pytest.approx(
                scores[by_location[(hit.path, hit.line_from)]] * prior, abs=1e-6
            )
    assert compared == 50


async def test_index_and_file_fallback_agree_on_a_real_workspace(core: MemoryCore) -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    for number, memory in enumerate(data["memories"]):
        if memory["as"] == "long_term":
            await core.memories.capture(MAIN, memory["text"], category=memory["category"])
        else:
            day = date.fromisoformat(memory["day"])
            when = datetime(day.year, day.month, day.day, 9, number, tzinfo=UTC)
            await core.notes.append(MAIN, memory["text"], now=when)
    write(core, "memory/summary/2026-02-03.md", "# 2026-02-03\n\n数据库连接池排查，Lisbon 机票\n")
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\n二月：数据库、出差、Lisbon\n")
    write(core, "memory/summary/2026-01-20.md", "# 2026-01-20\n\nPython 升级讨论\n")
    await core.memories.flush()
    await index_of(core).sync_scope(MAIN)

    def same(a: list[Hit], b: list[Hit], label: str) -> None:
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9), label
        key: Callable[[Hit], tuple[Any, ...]] = lambda h: (round(h.score, 9), h.path, h.line_from)  # noqa: E731
        assert sorted(map(key, a)) == sorted(map(key, b)), label
        for x, y in zip(sorted(a, key=key), sorted(b, key=key), strict=True):
            assert (x.text, x.kind, x.line_to, x.ref, x.created_at) == (
                y.text,
                y.kind,
                y.line_to,
                y.ref,
                y.created_at,
            ), label

    # The same pipeline on both sides: same settings, same day (priors read the date).
    settings = index_of(core).rank_settings
    assert settings.context_weights and settings.recency_boost > 0
    queries = [q["q"] for q in data["queries"]] + ["数据库 Lisbon", "Python 升级", "二月"]
    queries += ["what did I note in February?", "去年五月的事", "上个月 数据库"]
    variants = (None, [ChunkKind.LONG_TERM], [ChunkKind.DAILY, ChunkKind.SUMMARY])
    for number, query in enumerate(queries):
        for kinds in variants if number % 4 == 0 else variants[:1]:
            # Through the core: long-term hits get their line from the file as it is now.
            indexed = await core.finder.search(MAIN, query, limit=8, kinds=kinds)
            # Read as every search reads a text (the entities' other names added).
            asked = await core.finder.query(MAIN, query)
            files = fallback.search_files(
                core.workspace, MAIN, asked, limit=8, kinds=kinds, settings=settings, today=TODAY
            )
            same(indexed, files, f"{query} {kinds}")
    # The hidden daily summary is in neither.
    assert not any(
        "排查" in h.text for h in fallback.search_files(core.workspace, MAIN, "数据库连接池 排查")
    )


async def test_recall_k1_and_b_are_the_ranking_parameters(
    tmp_path: Path,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    request: pytest.FixtureRequest,
) -> None:
    """`recall.k1` and `recall.b` rank both the index and the file fallback."""
    scores: dict[tuple[float, float], list[float]] = {}
    for k1, b in ((1.2, 0.75), (2.0, 0.3)):
        env = dict(storage_env)
        if env and k1 != 1.2:  # a workspace of its own: a database (schema) of its own
            server = request.getfixturevalue("postgres_server")
            env["CHATMEM_POSTGRES_DSN"] = _enter(request, server.schema())
        base = load_config(None, env=env, workspace=tmp_path / f"ws-{k1}")
        recall = base.recall.model_copy(update={"k1": k1, "b": b})
        async with MemoryCore.open(base.model_copy(update={"recall": recall}), clock=clock) as core:
            for note in ("tea tea tea and cake", "tea", "coffee and a long walk by the river"):
                await core.notes.append(MAIN, note)
            indexed = await core.finder.search(MAIN, "tea", limit=5)
            core.guard.failed(RuntimeError("test: search the files"))
            from_files = await core.finder.search(MAIN, "tea", limit=5)
        assert [h.text for h in indexed] == [h.text for h in from_files]
        assert [h.score for h in indexed] == pytest.approx([h.score for h in from_files])
        scores[(k1, b)] = [h.score for h in indexed]
    assert scores[(1.2, 0.75)] != pytest.approx(scores[(2.0, 0.3)])


async def test_many_changed_files_are_written_a_group_at_a_time(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = core.workspace.memory_dir(MAIN)
    notes.mkdir(parents=True, exist_ok=True)
    for n in range(150):
        day = date(2025, 1, 1) + timedelta(days=n)
        (notes / f"{day.isoformat()}.md").write_text(f"- 09:00:00 note number w{n}x\n")
    transactions: list[int] = []
    real = index_writes.replace_files

    def counting(raw: Any, sid: int, items: Any, restamped: Any, stats: Any) -> None:
        transactions.append(len(items))
        real(raw, sid, items, restamped, stats)

    monkeypatch.setattr(index_writes, "replace_files", counting)
    stats = await index_of(core).sync_scope(MAIN)
    assert stats.files_indexed == 150
    assert transactions == [64, 64, 22]
    [hit] = await core.finder.search(MAIN, "w149x")
    assert hit.path == "memory/2025-05-30.md"


async def test_a_large_scope_is_scanned_for_edits_after_the_search(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = core.workspace.memory_dir(MAIN)
    notes.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        (notes / f"2025-01-0{n + 1}.md").write_text(f"- 09:00:00 note number {n}\n")
    ticking = ManualMonotonic()
    index = SearchIndex(
        database(core), core.workspace, 2.0, monotonic=ticking, background_scan_files=2
    )
    try:
        await index.sync_scope(MAIN)
        (notes / "2025-01-02.md").write_text("- 09:00:00 a zebra crossed the road\n")
        ticking.advance(3)
        listing = threading.Event()
        real = sqlite_index.stat_files

        def held_listing(*args: Any) -> Any:
            listing.wait(10)
            return real(*args)

        monkeypatch.setattr(sqlite_index, "stat_files", held_listing)
        await index.sync_if_stale(MAIN)  # three files: more than two, so in the background
        assert [h.path for h in await index.search(MAIN, "zebra", today=TODAY)] == []
        listing.set()
        await index.scanned()
        [hit] = await index.search(MAIN, "zebra", today=TODAY)
        assert hit.path == "memory/2025-01-02.md"
    finally:
        await index.close()
