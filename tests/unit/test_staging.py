"""Journalled captures: acknowledged before MEMORY.md is written, never lost, never doubled.

Crashes are real here: a child process captures and dies with `os._exit`, and the next
core to open the workspace must replay what it journalled.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from memory_core.base import atomic
from memory_core.base.clock import ManualClock
from memory_core.base.merge_values import ChangeKind
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm import store
from memory_core.longterm.memory_md_parser import parse_memory
from testkit.waiting import until
from tests.support import journal_sql

pytestmark = pytest.mark.storage

REPO = Path(__file__).resolve().parents[2]
BURST = ["apples", "bread", "cheese", "dates", "eggs", "figs", "grapes", "honey", "ice cream"]


def slow_writes(config: Config, delay: float = 60.0) -> Config:
    """Staged captures stay staged until something settles them."""
    return config.model_copy(
        update={"long_term": config.long_term.model_copy(update={"write_delay_seconds": delay})}
    )


@pytest.fixture
async def held(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(slow_writes(config), clock=clock) as opened:
        yield opened


def on_disk(core: MemoryCore, scope: ScopeKey = MAIN) -> dict[str, str]:
    path = core.memories.path(scope)
    if not path.exists():
        return {}
    return {e.id: e.content for e in parse_memory(path.read_text(encoding="utf-8")).entries}


async def test_capture_is_acknowledged_before_the_file_is_written(held: MemoryCore) -> None:
    entry, result = await held.memories.capture(MAIN, "likes green tea")
    assert result.count(ChangeKind.ADDED) == 1
    assert on_disk(held) == {}
    assert held.memories.path(MAIN).exists() is False
    # Any read through the core writes it first.
    assert [e.id for e in await held.memories.entries(MAIN)] == [entry.id]
    assert on_disk(held) == {entry.id: "likes green tea"}
    assert [r.action for r in await held.audit.recent(MAIN)] == ["add"]


async def test_search_sees_a_capture_made_a_moment_ago(held: MemoryCore) -> None:
    entry, _ = await held.memories.capture(MAIN, "the wifi password is hunter2")
    hits = await held.finder.search(MAIN, "wifi password")
    assert [h.ref for h in hits] == [entry.id]


async def test_a_burst_of_captures_is_one_write(
    held: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[Path] = []
    real = atomic.backup_then_write

    def counting(path: Path, text: str, backup: Path, *, root: Path) -> None:
        writes.append(path)
        real(path, text, backup, root=root)

    monkeypatch.setattr(store, "backup_then_write", counting)
    texts = [f"{word} is on the list" for word in BURST]
    entries = [(await held.memories.capture(MAIN, text))[0] for text in texts]
    again, result = await held.memories.capture(MAIN, texts[3])
    assert again.id == entries[3].id and result.count(ChangeKind.REINFORCED) == 1
    await held.memories.flush()
    assert len(writes) == 1
    assert set(on_disk(held)) == {e.id for e in entries}
    actions = [r.action for r in await held.audit.recent(MAIN, limit=50)]
    assert actions.count("add") == len(BURST) and actions.count("reinforce") == 1


async def test_the_write_follows_on_its_own(config: Config, clock: ManualClock) -> None:
    async with MemoryCore.open(slow_writes(config, 0.01), clock=clock) as core:
        entry, _ = await core.memories.capture(MAIN, "walks the dog at seven")
        await until(lambda: on_disk(core), what="the staged write")
        assert on_disk(core) == {entry.id: "walks the dog at seven"}


async def test_a_read_waits_for_the_write_in_progress(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = atomic.backup_then_write
    writing, release = threading.Event(), threading.Event()

    def slow(path: Path, text: str, backup: Path, *, root: Path) -> None:
        writing.set()
        release.wait(30)
        real(path, text, backup, root=root)

    monkeypatch.setattr(store, "backup_then_write", slow)
    async with MemoryCore.open(slow_writes(config, 0.0), clock=clock) as core:
        entry, _ = await core.memories.capture(MAIN, "walks the dog at seven")
        try:
            assert await asyncio.to_thread(writing.wait, 30)  # the background write has it
            assert on_disk(core) == {}
            flushing = asyncio.ensure_future(core.memories.flush())
            for _ in range(20):
                await asyncio.sleep(0)
            assert not flushing.done()  # it waits for the write in progress
        finally:
            release.set()
        await flushing
        assert on_disk(core) == {entry.id: "walks the dog at seven"}


async def test_close_writes_what_is_staged(config: Config, clock: ManualClock) -> None:
    async with MemoryCore.open(slow_writes(config), clock=clock) as core:
        entry, _ = await core.memories.capture(ScopeKey("peer:7"), "plays the cello")
        path = core.memories.path(ScopeKey("peer:7"))
        assert not path.exists()
    assert entry.id in path.read_text(encoding="utf-8")


async def test_a_hand_edit_meanwhile_is_kept_and_the_id_too(held: MemoryCore) -> None:
    first, _ = await held.memories.capture(MAIN, "likes hiking in the alps")
    await held.memories.flush()
    path = held.memories.path(MAIN)
    second, _ = await held.memories.capture(MAIN, "drinks coffee black")
    # A person edits the file while the second capture is staged.
    path.write_text(
        path.read_text(encoding="utf-8").replace("hiking in the alps", "sailing on the lake"),
        encoding="utf-8",
    )
    await held.memories.flush()
    assert on_disk(held) == {
        first.id: "likes sailing on the lake",
        second.id: "drinks coffee black",
    }


async def test_a_failed_write_keeps_the_captures_and_retries(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [OSError("disk full")]
    real = atomic.backup_then_write

    def flaky(path: Path, text: str, backup: Path, *, root: Path) -> None:
        if failures:
            raise failures.pop()
        real(path, text, backup, root=root)

    monkeypatch.setattr(store, "backup_then_write", flaky)
    monkeypatch.setattr("memory_core.longterm.staging.RETRY_FIRST_SECONDS", 0.01)
    async with MemoryCore.open(slow_writes(config, 0.0), clock=clock) as core:
        entry, _ = await core.memories.capture(MAIN, "allergic to peanuts")
        await until(lambda: on_disk(core), what="the retried write")
        assert failures == []
        assert on_disk(core) == {entry.id: "allergic to peanuts"}


async def test_flush_reports_a_failing_write(
    held: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry, _ = await held.memories.capture(MAIN, "allergic to peanuts")

    def broken(path: Path, text: str, backup: Path, *, root: Path) -> None:
        raise OSError("read-only file system")

    with monkeypatch.context() as patch:
        patch.setattr(store, "backup_then_write", broken)
        with pytest.raises(OSError, match="read-only"):
            await held.memories.flush()
    await held.memories.flush()
    assert on_disk(held) == {entry.id: "allergic to peanuts"}


async def test_without_the_journal_a_capture_writes_at_once(
    config: Config, clock: ManualClock
) -> None:
    direct = config.model_copy(
        update={"long_term": config.long_term.model_copy(update={"journal": False})}
    )
    async with MemoryCore.open(direct, clock=clock) as core:
        entry, _ = await core.memories.capture(MAIN, "likes green tea")
        assert on_disk(core) == {entry.id: "likes green tea"}


async def test_concurrent_captures_in_many_scopes_land_in_their_own_files(
    held: MemoryCore,
) -> None:
    scopes = [ScopeKey(f"peer:{n}") for n in range(6)]

    async def chat(scope: ScopeKey) -> list[str]:
        return [(await held.memories.capture(scope, f"{scope} fact {n}"))[0].id for n in range(8)]

    ids = await asyncio.gather(*(chat(s) for s in scopes))
    await held.memories.flush()
    for scope, scope_ids in zip(scopes, ids, strict=True):
        stored = on_disk(held, scope)
        assert set(stored) == set(scope_ids)
        assert all(text.startswith(f"{scope} fact") for text in stored.values())


# --- crashes -------------------------------------------------------------------------------

CHILD = """
import asyncio, os, sys
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

async def main() -> None:
    config = load_config(None, env={env!r}, workspace={workspace!r})
    config = config.model_copy(
        update={{"long_term": config.long_term.model_copy(update={{"write_delay_seconds": 60.0}})}}
    )
    opened = MemoryCore.open(config)  # held: a collected one would close the core
    core = await opened.__aenter__()  # never left: the process is killed
    scope = ScopeKey({scope!r})
    for text in {texts!r}:
        entry, _ = await core.memories.capture(scope, text)
        print(entry.id, flush=True)
{then}
    os._exit(0)

asyncio.run(main())
"""


def run_child(
    workspace: Path,
    scope: str,
    texts: list[str],
    then: str = "",
    env: Mapping[str, str] | None = None,
) -> list[str]:
    script = CHILD.format(
        workspace=str(workspace),
        env=dict(env or {}),
        scope=scope,
        texts=texts,
        then=textwrap.indent(then, "    "),
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.split()


async def test_captures_of_a_process_that_died_are_replayed(
    config: Config, workspace: Path, storage_env: Mapping[str, str]
) -> None:
    texts = ["keeps bees", "speaks portuguese", "keeps bees"]
    ids = await asyncio.to_thread(run_child, workspace, "peer:9", texts, "", storage_env)
    assert ids[0] == ids[2]
    scope = ScopeKey("peer:9")
    async with MemoryCore.open(config) as core:
        # Replayed while the core opened: the file holds them before any read.
        assert set(on_disk(core, scope)) == set(ids)
        stored = {e.id: e for e in await core.memories.entries(scope)}
        assert {i: stored[i].content for i in ids} == {
            ids[0]: "keeps bees",
            ids[1]: "speaks portuguese",
        }
        assert stored[ids[0]].hits == 1
        hits = await core.finder.search(scope, "portuguese")
        assert [h.ref for h in hits] == [ids[1]]
    async with MemoryCore.open(config) as core:  # replayed once, not at every start
        assert (await core.memories.get_entry(scope, ids[0])).hits == 1


async def test_a_crash_after_the_write_does_not_apply_twice(
    config: Config, workspace: Path, storage_env: Mapping[str, str]
) -> None:
    # The file is written, then the process dies before the journal rows are removed.
    then = "core.memories.staging.journal.remove = lambda seqs: os._exit(0)\nawait core.memories.flush()\n"
    ids = await asyncio.to_thread(run_child, workspace, "main", ["keeps bees"], then, storage_env)
    async with MemoryCore.open(config) as core:
        [entry] = await core.memories.entries(MAIN)
        assert (entry.id, entry.hits) == (ids[0], 0)


async def test_a_live_process_keeps_its_journal(config: Config, clock: ManualClock) -> None:
    async with MemoryCore.open(slow_writes(config), clock=clock) as first:
        entry, _ = await first.memories.capture(MAIN, "keeps bees")
        async with MemoryCore.open(slow_writes(config), clock=clock) as second:
            # `second` must not replay `first`'s capture: first is alive and will write it.
            assert on_disk(second) == {}
        await first.memories.flush()
        assert on_disk(first) == {entry.id: "keeps bees"}
    async with MemoryCore.open(config, clock=clock) as third:
        [only] = await third.memories.entries(MAIN)
        assert (only.id, only.hits) == (entry.id, 0)


async def test_an_unreadable_journal_row_is_kept_not_dropped(
    config: Config, workspace: Path
) -> None:
    async with MemoryCore.open(config) as core:
        await journal_sql(
            core,
            "INSERT INTO captures (owner, scope, payload) VALUES ('dead0', 'main', '{\"x\": 1}')",
        )
    async with MemoryCore.open(config) as core:
        assert await core.memories.entries(MAIN) == []
        assert await journal_sql(core, "SELECT count(*) FROM captures") == [(1,)]
    assert not (workspace / ".chatmem" / "owners" / "dead0.lock").exists()


async def test_a_capture_made_while_the_file_is_written_counts_once(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write takes the view as its captures left it: a capture made meanwhile is
    re-applied to the written file, so it must not be in that write too (it would count
    as said twice: a reinforcement nobody made)."""
    async with MemoryCore.open(slow_writes(config, 0.0), clock=clock) as core:
        long_term_store = core.memories.store.files  # what the staging writes through
        real = long_term_store.update
        writing, go_on = asyncio.Event(), asyncio.Event()

        async def held_back(*args: Any, **kwargs: Any) -> Any:
            writing.set()
            await go_on.wait()
            return await real(*args, **kwargs)

        monkeypatch.setattr(long_term_store, "update", held_back)
        first, _ = await core.memories.capture(MAIN, "walks the dog at seven")
        await writing.wait()  # the background write has the first capture in hand
        second, _ = await core.memories.capture(MAIN, "plays the cello")
        go_on.set()
        await core.memories.flush()
        stored = {e.id: e for e in await core.memories.entries(MAIN)}
        assert (stored[first.id].hits, stored[second.id].hits) == (0, 0)
        assert stored[second.id].score == second.score == 0.6
