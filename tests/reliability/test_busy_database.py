"""Item 1 of issue 11: a database locked by someone else is waited for, never taken for a
broken one; a broken index is tried again later instead of staying off for good.

The lock is real: another connection holds `BEGIN EXCLUSIVE` on the workspace database
while the core captures, appends, chats and searches. SQLite's own wait per attempt is
set shorter than the lock, so what carries the calls through is the retry of the
database layer (the situation of a lock held longer than one busy timeout).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.errors import ChatmemError, DatabaseBusy
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.guard import RETRY_SECONDS
from memory_core.recall.request import SearchRequest
from memory_core.storage import db
from testkit.waiting import WITHIN, until
from tests.reliability.support import with_long_term
from tests.support import index_of, sql

pytestmark = pytest.mark.sqlite_only
"""SQLite's own locks and files (busy, broken, repaired)."""

DEGRADED = ("search index unusable", "database unavailable")


def hold_exclusive(path: Path, held: threading.Event, release: threading.Event) -> None:
    """Another process's long write: the database's write lock until `release`."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        held.set()
        assert release.wait(WITHIN), "the test never let the lock go"
        conn.execute("COMMIT")
    finally:
        conn.close()


def busy_retries(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("database locked")]


def degradations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(DEGRADED)]


async def test_a_transient_lock_causes_no_degradation(
    config: Config,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 100)
    caplog.set_level(logging.INFO, logger="memory_core")
    caplog.set_level(logging.DEBUG, logger="memory_core.storage.db")
    async with MemoryCore.open(
        with_long_term(config, write_delay_seconds=0.0), clock=clock
    ) as core:
        await core.memories.capture(MAIN, "the flat has a gas boiler")
        await core.notes.append(MAIN, "first note of the day")
        await core.memories.flush()
        held, release = threading.Event(), threading.Event()
        holder = asyncio.create_task(
            asyncio.to_thread(hold_exclusive, core.workspace.db_path, held, release)
        )
        await asyncio.to_thread(held.wait)

        async def capture() -> str:
            entry, _ = await core.memories.capture(MAIN, "the boiler was serviced in May")
            await core.memories.flush()  # its file write, audit rows and index update
            return entry.id

        work = asyncio.gather(
            capture(),
            core.notes.append(MAIN, "called the plumber about the boiler noise"),
            core.conversation.turn(MAIN, "the boiler makes a knocking noise again"),
            core.finder.search(MAIN, "gas boiler"),
        )
        # The lock stays until the calls met it past SQLite's own wait, again and again.
        await until(lambda: len(busy_retries(caplog)) >= 4, what="calls retrying the lock")
        release.set()
        entry_id, (note_path, _), turn, hits = await work
        await holder

        assert degradations(caplog) == []
        assert core.degraded_reason is None and core.guard.index is not None
        assert core.guard.degradations == 0
        assert "the flat has a gas boiler" in [h.text for h in hits]
        assert turn.reply  # the turn's messages were stored
        # Everything reached the index and the audit log, nothing was dropped on the way.
        found = await index_of(core).search(
            MAIN, SearchRequest("boiler plumber serviced", limit=10)
        )
        assert {h.text for h in found} >= {
            "the boiler was serviced in May",
            "called the plumber about the boiler noise",
        }
        assert note_path.endswith(".md")
        audited = await sql(core, "SELECT entry_id FROM audit WHERE action = 'add'")
        assert (entry_id,) in [tuple(r) for r in audited]


async def test_a_lock_held_past_every_retry_is_one_clear_error_not_damage(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(db, "BUSY_RETRY_SECONDS", 0.3)
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(MAIN, "the flat has a gas boiler")
        await core.memories.flush()
        held, release = threading.Event(), threading.Event()
        holder = asyncio.create_task(
            asyncio.to_thread(hold_exclusive, core.workspace.db_path, held, release)
        )
        await asyncio.to_thread(held.wait)
        with pytest.raises(DatabaseBusy) as caught:
            await core.conversation.turn(MAIN, "is the boiler fine?")
        assert isinstance(caught.value, ChatmemError)
        assert "locked" in str(caught.value) and "\n" not in str(caught.value)
        # A note is the file's: it is saved, and indexed by the next sync.
        path, _ = await core.notes.append(MAIN, "boiler pressure at 1.2 bar")
        assert "boiler pressure at 1.2 bar" in (core.workspace.root / path).read_text("utf-8")
        release.set()
        await holder
        assert core.degraded_reason is None and core.guard.degradations == 0
        await index_of(core).sync_scope(MAIN)
        assert [h.text for h in await core.finder.search(MAIN, "pressure")] == [
            "boiler pressure at 1.2 bar"
        ]


async def test_a_broken_index_degrades_then_comes_back_after_repair(
    config: Config,
    clock: ManualClock,
    monotonic: ManualMonotonic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The index breaks under a running core (a table gone); searches answer from the
    files; `chatmem reindex` run elsewhere repairs it, and once the cool-down is over the
    running core uses the index again, without a restart."""
    caplog.set_level(logging.INFO, logger="memory_core")
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        await core.memories.capture(MAIN, "we picked postgres for the billing service")
        await core.notes.append(MAIN, "postgres upgrade planned for friday")
        healthy = sorted(h.text for h in await core.finder.search(MAIN, "postgres"))
        with sqlite3.connect(core.workspace.db_path) as damage:
            damage.execute("DROP TABLE fts_scoped")
        damage.close()

        assert sorted(h.text for h in await core.finder.search(MAIN, "postgres")) == healthy
        assert core.degraded_reason is not None and core.guard.index is None
        assert len(degradations(caplog)) == 1
        # Within the cool-down the files answer, and the index is not touched.
        assert sorted(h.text for h in await core.finder.search(MAIN, "postgres")) == healthy
        assert core.guard.index is None

        async with MemoryCore.open(config, clock=clock) as other:  # `chatmem reindex`
            await other.reindex()
        monotonic.advance(RETRY_SECONDS - 1)
        assert sorted(h.text for h in await core.finder.search(MAIN, "postgres")) == healthy
        assert core.guard.index is None  # a second before the cool-down is over
        monotonic.advance(1)

        assert sorted(h.text for h in await core.finder.search(MAIN, "postgres")) == healthy
        assert core.degraded_reason is None and core.guard.index is not None
        assert any("usable again" in r.getMessage() for r in caplog.records)
        assert sorted(h.text for h in await index_of(core).search(MAIN, "postgres")) == healthy


async def test_an_index_still_broken_after_the_cool_down_stays_degraded(
    config: Config, clock: ManualClock
) -> None:
    async with MemoryCore.open(config, clock=clock) as core:
        await core.notes.append(MAIN, "postgres upgrade planned for friday")
        with sqlite3.connect(core.workspace.db_path) as damage:
            damage.execute("DROP TABLE fts_scoped")
        damage.close()
        core.guard.retry_seconds = 0.0
        for _ in range(3):  # each try finds it broken again, and the files answer
            hits = await core.finder.search(MAIN, "postgres")
            assert [h.text for h in hits] == ["postgres upgrade planned for friday"]
            assert core.degraded_reason is not None
