"""Each layer built on its own from what it depends on, with no `MemoryCore`: the search
index over a bare database, staging over a store and a journal, the chat engine and the
archiver over the memory service and in-memory storage backends (testkit/storage.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.locks import LockRegistry
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config, load_config
from memory_core.config.services import LLMSettings
from memory_core.conversation.archiver import Archiver
from memory_core.conversation.chat import ChatEngine
from memory_core.llm.client import ChatReply, LLMClient, Message
from memory_core.longterm.staging import Applied, Staging
from memory_core.longterm.store import LongTermStore
from memory_core.memory_service import MemoryService
from memory_core.recall.index import SearchIndex
from memory_core.services import build_memory_service
from memory_core.storage.db import Database
from memory_core.storage.journal import CaptureJournal
from memory_core.storage.sessions import ArchiveState, NewMessage
from testkit.storage import MemoryAudit, MemoryHistory
from tests.postgres import with_storage

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
PEER = ScopeKey("peer:42")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.at(tmp_path / "ws")
    ws.ensure_scope(MAIN)
    return ws


@pytest.fixture
def config(workspace: Workspace) -> Config:
    return load_config(None, env=with_storage(), workspace=workspace.root)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def memory(config: Config, workspace: Workspace, clock: ManualClock) -> MemoryService:
    locks = LockRegistry(workspace.locks_dir)
    return build_memory_service(config, workspace, locks, clock, audit=MemoryAudit())


class ScriptedModel(LLMClient):
    """A model that answers every call with the next scripted reply and keeps what it was
    sent."""

    def __init__(self, *replies: str) -> None:
        super().__init__(LLMSettings(model="scripted"))
        self.replies = list(replies)
        self.sent: list[list[Message]] = []

    async def chat(self, messages: Sequence[Message], **_: Any) -> ChatReply:
        self.sent.append(list(messages))
        return ChatReply(content=self.replies.pop(0))


# --- the search index over a bare database ------------------------------------------


@pytest.fixture
async def database(workspace: Workspace) -> AsyncIterator[Database]:
    db = await Database.open(workspace.db_path)
    yield db
    await db.close()


async def test_search_index_on_its_own(workspace: Workspace, database: Database) -> None:
    day = workspace.daily_path(MAIN, NOW.date())
    day.parent.mkdir(parents=True, exist_ok=True)
    day.write_text("# 2026-03-01\n\n- 09:00:00 the plumber comes on Tuesday\n", encoding="utf-8")
    index = SearchIndex(database, workspace)
    stats = await index.sync_scope(MAIN)
    assert (stats.files_indexed, stats.chunks_added) == (1, 1)
    [hit] = await index.search(MAIN, "plumber")
    assert (hit.path, hit.kind) == (workspace.relative(day), ChunkKind.DAILY)

    step = await index.message_step(PEER, "s1", "alice", "my locker code is 4512", NOW)
    await database.write(lambda conn: step(conn, 7))
    [message] = await index.search(PEER, "locker 4512")
    assert (message.path, message.line_from, message.text) == (
        "sessions/s1",
        7,
        "alice: my locker code is 4512",
    )
    assert await index.search(MAIN, "locker 4512") == []
    assert await index.search(PEER, "plumber") == []
    assert await index.message_context(PEER, "s1", 7) == [(7, "alice: my locker code is 4512")]


async def test_database_runs_a_transaction_whole_or_not_at_all(database: Database) -> None:
    await database.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))

    def half(conn: Any) -> None:
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        await database.write(half)
    assert await database.read(lambda conn: conn.execute("SELECT COUNT(*) FROM t").fetchall()) == [
        (0,)
    ]


# --- staging over a store and a journal -----------------------------------------------


async def test_staging_on_its_own(workspace: Workspace, config: Config, clock: ManualClock) -> None:
    store = LongTermStore(workspace, LockRegistry(workspace.locks_dir), 0.2)
    journal = await CaptureJournal.open(
        workspace.state_dir / "j.sqlite3", workspace.state_dir / "o"
    )
    written: list[tuple[ScopeKey, list[Applied]]] = []

    async def on_written(scope: ScopeKey, applied: list[Applied], *_: Any) -> None:
        written.append((scope, applied))

    staging = Staging(store, journal, config.scoring.policy(), 30.0, clock, on_written)
    try:
        result = await staging.capture(MAIN, Proposal("prefers green tea"), "test", NOW)
        assert [c.kind for c in result.changes] == [ChangeKind.ADDED]
        assert not store.path(MAIN).exists()  # acknowledged, not yet written
        assert len(await journal.adopt_orphans()) == 1  # but journalled
        await staging.settle(MAIN)
        assert "prefers green tea" in store.path(MAIN).read_text(encoding="utf-8")
        assert [(s, len(a)) for s, a in written] == [(MAIN, 1)]
        assert await journal.adopt_orphans() == []  # the row went with the write
    finally:
        await staging.close()
        await journal.close()


# --- the chat engine and the archiver over in-memory storage ------------------------------


async def test_chat_engine_on_its_own(memory: MemoryService, config: Config) -> None:
    entry, _ = await memory.long_term.capture(MAIN, "user prefers green tea over coffee")
    history, audit, model = (
        MemoryHistory(),
        MemoryAudit(),
        ScriptedModel("Green tea, then.", "Any tea you like."),
    )
    engine = ChatEngine(memory, history, model, config, audit)
    result = await engine.turn(MAIN, "which tea should I order?", speaker="alice")
    assert result.reply == "Green tea, then."
    assert [(m.role, m.content) for m in history.messages] == [
        ("user", "which tea should I order?"),
        ("assistant", "Green tea, then."),
    ]
    assert history.indexed == []  # no index in this service: nothing to index
    system = str(model.sent[0][0]["content"])
    assert entry.content in system  # the prompt carries the long-term memory
    # Another scope's turn neither sees this memory nor this session.
    other = await engine.turn(PEER, "which tea should I order?")
    assert other.session_id != result.session_id
    assert entry.content not in str(model.sent[1][0]["content"])


async def test_archiver_on_its_own(
    memory: MemoryService, config: Config, workspace: Workspace, clock: ManualClock
) -> None:
    history, audit = MemoryHistory(), MemoryAudit()
    session = await history.open_session(MAIN, NOW - timedelta(days=1))
    for text in ("we picked the blue tent", "blue tent it is"):
        await history.add_message(
            NewMessage(MAIN, session.id, "user", text, NOW - timedelta(days=1))
        )
    await history.close_session(session.id, NOW - timedelta(hours=20))
    archiver = Archiver(
        memory,
        history,
        LLMClient(LLMSettings(model="")),
        config.archive,
        audit,
        LockRegistry(workspace.locks_dir),
    )
    assert await archiver.due(MAIN, NOW + timedelta(hours=7))
    report = await archiver.run(MAIN)
    assert (report.moved, report.failed) == (2, 0)
    [raw] = report.files
    assert "blue tent" in (workspace.root / raw).read_text(encoding="utf-8")
    assert {m.archived for m in history.messages} == {ArchiveState.TRUE}
    last = await history.last_archive_run(MAIN)
    assert last is not None and last.moved == 2
    # The raw file is searchable through the service (files only: no index here).
    hits = await memory.finder.search(MAIN, "blue tent")
    assert hits and {h.path for h in hits} == {raw}
