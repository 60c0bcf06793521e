"""Forgetting is reversible for `long_term.forgotten_keep_days`; purging is for good; only a
caller that asks creates a workspace; the rules a person's input meets in the core (scope
names, id prefixes, the size of a memory)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.base.errors import ChatmemError, EntryNotFound, ScopeError, WorkspaceMissing
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config, load_config
from memory_core.config.memory import LongTermSettings
from memory_core.engine import MemoryCore
from memory_core.longterm.forgotten import ForgottenFile, render_kept
from memory_core.longterm.memory_md import QuarantinedBlock
from tests.conftest import START
from tests.postgres import with_storage
from tests.support import sql

pytestmark = pytest.mark.storage

PEER = ScopeKey("peer:9")


def with_long_term(config: Config, **values: object) -> Config:
    return config.model_copy(update={"long_term": config.long_term.model_copy(update=values)})


@pytest.fixture
async def direct(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    """A core whose captures write the file at once (no journal)."""
    async with MemoryCore.open(with_long_term(config, journal=False), clock=clock) as opened:
        yield opened


async def test_forgotten_entries_reach_no_search_recall_or_prompt(
    core: MemoryCore, clock: ManualClock
) -> None:
    kept, _ = await core.memories.capture(PEER, "the spare key is under the blue flowerpot")
    other, _ = await core.memories.capture(
        PEER, "likes green tea in the morning", importance="high"
    )
    assert "flowerpot" in await core.memories.prompt_memories(PEER)
    await core.memories.forget(PEER, kept.id)
    assert [h.text for h in await core.finder.search(PEER, "spare key flowerpot")] == []
    injection = await core.finder.recall(PEER, "where is the spare key? the flowerpot?")
    assert injection.hits == [] and "flowerpot" not in injection.block
    assert "flowerpot" not in await core.memories.prompt_memories(PEER)
    [restorable] = await core.memories.restorable(PEER)
    assert restorable.id == kept.id and restorable.scored_at == clock()
    # Its file is where nothing that serves the scope looks, and no path reaches it.
    path = core.workspace.state_dir / "forgotten" / "peer_9.md"
    assert "flowerpot" in path.read_text(encoding="utf-8")
    with pytest.raises(ChatmemError, match="refused"):
        await core.finder.read(PEER, ".chatmem/forgotten/peer_9.md")
    await core.reindex()
    assert await core.finder.search(PEER, "flowerpot") == []
    assert other.id not in {e.id for e in await core.memories.restorable(PEER)}


async def test_restore_brings_back_the_entry_with_its_metadata(
    core: MemoryCore, clock: ManualClock
) -> None:
    entry, _ = await core.memories.capture(MAIN, "prefers window seats", category="preference")
    clock.advance(timedelta(days=1))
    await core.memories.capture(MAIN, "prefers window seats", category="preference")  # a hit
    clock.advance(timedelta(days=2))
    forgotten = await core.memories.forget(MAIN, entry.id)
    clock.advance(timedelta(days=3))
    restored = await core.memories.restore(MAIN, entry.id)
    assert restored.id == entry.id
    assert (restored.category, restored.hits, restored.created_at) == ("preference", 1, START)
    assert restored.score == pytest.approx(forgotten.score)  # no decay: within the grace days
    assert restored.archived is None
    assert [e.id for e in await core.memories.entries(MAIN)] == [entry.id]
    assert await core.memories.restorable(MAIN) == []
    actions = [r.action for r in await core.audit.history(MAIN, entry.id)]
    assert actions == ["add", "reinforce", "forget", "restore"]


async def test_forgetting_by_decay_keeps_the_entry_in_every_write_path(
    core: MemoryCore, clock: ManualClock
) -> None:
    """Consolidation forgets through a merge; a staged capture's background write decays
    the whole file too: both keep what they forget."""
    first, _ = await core.memories.capture(MAIN, "an old habit of reading at night")
    await core.memories.flush()
    clock.advance(timedelta(days=400))
    second, _ = await core.memories.capture(MAIN, "a new hobby: bouldering twice a week")
    await core.memories.flush()  # the staged write decays the file: the old entry falls out
    assert [e.id for e in await core.memories.entries(MAIN)] == [second.id]
    [kept] = await core.memories.restorable(MAIN)
    assert (kept.id, kept.content, kept.created_at) == (first.id, first.content, START)
    assert kept.score < core.policy.forget_below and kept.scored_at == clock()
    # A decayed entry comes back at the low-importance start, counted as activated now.
    back = await core.memories.restore(MAIN, first.id)
    assert back.score == pytest.approx(0.4) and back.last_activated == clock()
    clock.advance(timedelta(days=400))
    result = await core.memories.consolidate(MAIN)
    assert result.stats["forget"] == 2
    assert sorted(e.id for e in await core.memories.restorable(MAIN)) == sorted(
        [first.id, second.id]
    )


async def test_kept_only_the_configured_days(config: Config, clock: ManualClock) -> None:
    async with MemoryCore.open(with_long_term(config, forgotten_keep_days=10), clock=clock) as core:
        entry, _ = await core.memories.capture(MAIN, "the gate code is 4482")
        await core.memories.forget(MAIN, entry.id)
        clock.advance(timedelta(days=9, hours=23))
        assert [e.id for e in await core.memories.restorable(MAIN)] == [entry.id]
        clock.advance(timedelta(hours=2))
        assert await core.memories.restorable(MAIN) == []
        with pytest.raises(EntryNotFound):
            await core.memories.restore(MAIN, entry.id)
        kept_file = core.workspace.state_dir / "forgotten" / "main.md"
        assert kept_file.exists()  # dropped by the next write, not by a read
        await core.memories.consolidate(MAIN)
        assert not kept_file.exists()


async def test_restore_after_a_crash_between_its_two_writes(
    direct: MemoryCore, clock: ManualClock
) -> None:
    """Restore writes the long-term file first, then drops the entry from the forgotten
    file: a crash in between leaves it in both, never in neither."""
    entry, _ = await direct.memories.capture(MAIN, "my passport expires in May")
    await direct.memories.forget(MAIN, entry.id)
    kept_file = direct.workspace.state_dir / "forgotten" / "main.md"
    left = kept_file.read_bytes()
    await direct.memories.restore(MAIN, entry.id)
    kept_file.write_bytes(left)  # as if the process died before the second write
    assert await direct.memories.restorable(MAIN) == []  # a live entry is not offered
    again = await direct.memories.restore(MAIN, entry.id)
    assert again.id == entry.id
    assert not kept_file.exists()
    assert [e.id for e in await direct.memories.entries(MAIN)] == [entry.id]


async def test_restore_while_a_staged_capture_waits_to_be_written(
    core: MemoryCore,
) -> None:
    """A restore writes the long-term file, which first writes the staged captures; that
    write's follow-up keeps what it forgot, under the forgotten file's lock: a restore
    holding that lock meanwhile would wait for itself."""
    old, _ = await core.memories.capture(MAIN, "an entry to forget and bring back")
    await core.memories.forget(MAIN, old.id)
    texts = ["tulips in spring", "taxes due in April", "a dentist on Monday", "jazz on Fridays"]
    restoring = asyncio.ensure_future(core.memories.restore(MAIN, old.id))
    # Captures staged while the restore is under way: its write writes them first.
    for text in texts:
        await asyncio.sleep(0)
        await core.memories.capture(MAIN, text)
    restored = await asyncio.wait_for(restoring, 60)  # a guard against a hang, not a limit
    assert restored.id == old.id
    assert sorted(e.content for e in await core.memories.entries(MAIN)) == sorted(
        [*texts, old.content]
    )


async def test_purge_empties_the_audit_text_and_keeps_the_rows(direct: MemoryCore) -> None:
    entry, _ = await direct.memories.capture(MAIN, "call the notary at 555-0199")
    await direct.memories.forget(MAIN, entry.id)
    with pytest.raises(EntryNotFound, match="no forgotten entry"):
        await direct.purge(MAIN, ["nosuchid"])
    [purged] = await direct.purge(MAIN, [entry.id])
    assert purged.id == entry.id
    rows = await sql(
        direct, "SELECT action, content FROM audit WHERE entry_id = ? ORDER BY id", entry.id
    )
    assert rows == [("add", None), ("forget", None), ("purge", None)]
    assert await direct.memories.restorable(MAIN) == []
    assert await direct.audit.forgotten(MAIN) != []  # the log still says it was forgotten
    for path in direct.workspace.root.rglob("*"):
        if path.is_file():
            assert b"555-0199" not in path.read_bytes(), path


def test_the_forgotten_file_round_trips(tmp_path: Path) -> None:
    """MEMORY.md's blocks outside MEMORY.md's sections: what is written is what is read,
    archive flags and unreadable blocks included."""
    store = ForgottenFile(Workspace.at(tmp_path), keep_days=30, archive_below=0.2)
    now = START + timedelta(days=1)
    entries = [
        MemoryEntry("a1", "a pinned one", "fact", 0.7, START, START, START, pinned=True),
        MemoryEntry("b2", "### looks like a heading", "todo", 0.01, START, START, now),
        MemoryEntry(
            "c3", "by hand", "fact", 0.5, START, START, START, archived=ArchiveReason.MANUAL
        ),
    ]
    store.keep(MAIN, entries, now)
    read = store.read(MAIN)
    assert sorted(read.entries, key=lambda e: e.id) == entries
    assert read.entries[0].id == "b2"  # newest first
    text = render_kept(entries, [QuarantinedBlock("### [bad] x | y\nkept as is")], now, 0.2)
    store.path(MAIN).write_text(text, encoding="utf-8")
    read = store.read(MAIN)
    assert sorted(e.id for e in read.entries) == ["a1", "b2", "c3"]
    assert [b.text for b in read.quarantined] == ["### [bad] x | y\nkept as is"]
    store.take(MAIN, {"a1", "b2", "c3"}, now)
    assert [b.text for b in store.read(MAIN).quarantined] == ["### [bad] x | y\nkept as is"]


# --- a workspace is made only on request ----------------------------------------------


async def test_open_without_create_refuses_a_missing_workspace(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    config = load_config(None, env=with_storage(), workspace=missing)
    with pytest.raises(WorkspaceMissing, match=f"no workspace at {missing}"):
        async with MemoryCore.open(config, create=False):
            pass
    assert not missing.exists()
    assert not MemoryCore.workspace_exists(missing)
    async with MemoryCore.open(config) as core:  # a bot's or a test's: made
        await core.memories.capture(MAIN, "hello")
    assert MemoryCore.workspace_exists(missing)
    async with MemoryCore.open(config, create=False) as core:
        assert [e.content for e in await core.memories.entries(MAIN)] == ["hello"]
    # Either MEMORY.md or the state directory makes one.
    hand = tmp_path / "hand"
    hand.mkdir()
    assert not MemoryCore.workspace_exists(hand)
    (hand / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    assert MemoryCore.workspace_exists(hand)


# --- input rules ------------------------------------------------------------------------


def test_scope_keys_as_people_type_them() -> None:
    assert ScopeKey.parse("main ") == MAIN
    assert ScopeKey.parse(" peer : 42") == ScopeKey("peer:42")
    assert ScopeKey.parse("group:telegram:-100") == ScopeKey("group:telegram:-100")
    for bad in ("", "  ", "peer:", ":42", "group::1", "a: :b"):
        with pytest.raises(ScopeError):
            ScopeKey.parse(bad)
    # The constructor still takes every key an adapter builds, unchanged.
    assert ScopeKey(" odd : key ").value == " odd : key "


async def test_ids_by_unique_prefix(direct: MemoryCore) -> None:
    a, _ = await direct.memories.capture(MAIN, "first memory about apples")
    b, _ = await direct.memories.capture(MAIN, "second memory about bicycles")
    assert await direct.memories.match_id(MAIN, a.id) == a.id
    assert await direct.memories.match_id(MAIN, a.id[:6]) == a.id
    await direct.memories.forget(MAIN, b.id)
    assert await direct.memories.match_id(MAIN, b.id[:6]) == b.id  # forgotten ones too
    with pytest.raises(EntryNotFound, match="no entry ''"):
        await direct.memories.match_id(MAIN, "")  # no prefix names nothing, not everything


async def test_a_memory_has_a_size_limit(config: Config, clock: ManualClock) -> None:
    assert LongTermSettings().max_capture_bytes == 4 * 1024 * 1024
    small = with_long_term(config, max_capture_bytes=10)
    async with MemoryCore.open(small, clock=clock) as core:
        await core.memories.capture(MAIN, "ten bytes!")
        with pytest.raises(ChatmemError, match=r"long_term\.max_capture_bytes"):
            await core.memories.capture(MAIN, "eleven byte")
        entry = (await core.memories.entries(MAIN))[0]
        with pytest.raises(ChatmemError, match="over the limit of 10 bytes"):
            await core.memories.edit(MAIN, entry.id, "汉字汉字")  # 12 bytes in UTF-8
        assert [e.content for e in await core.memories.entries(MAIN)] == ["ten bytes!"]
