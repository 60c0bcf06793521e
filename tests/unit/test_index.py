"""The search index: incremental sync after hand edits, deletes and renames, chunk line
ranges, monthly summaries hiding daily ones, message chunks, filters, degraded mode and
repair, and agreement of the FTS5 index with rank-bm25 over the same tokens."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic, format_when
from memory_core.base.errors import DatabaseUnwritable
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import SearchIndex, file_sync
from memory_core.recall.index import rebuild as index_rebuild
from memory_core.recall.index import writes as index_writes
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import (
    another_process_holds,
    chunk_counts,
    database,
    index_message,
    index_of,
    sql,
)
from tests.unit.index_support import (
    DAY,
    bump_mtime,
    chunk_rows,
    eager_config_fixture,  # noqa: F401  (a fixture)
    eager_fixture,  # noqa: F401  (a fixture)
    found,
    texts,
    write,
)

pytestmark = pytest.mark.storage


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
    real = file_sync.prepare_file

    def counting(workspace: Any, path: Path, *rest: Any) -> Any:
        reads.append(path)
        return real(workspace, path, *rest)

    monkeypatch.setattr(file_sync, "prepare_file", counting)
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
    hits = await core.finder.search(MAIN, SearchRequest("kayak tax refund", limit=5, min_score=0.0))
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
            found_hits = await index.search(scope, SearchRequest(query, limit=50))
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
    if database(core).dialect.name == "sqlite":
        # FTS5's own consistency check of its index (contentless: nothing else).
        await sql(core, "INSERT INTO fts_scoped (fts_scoped) VALUES ('integrity-check')")
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
