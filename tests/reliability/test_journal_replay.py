"""Item 5 of issue 11: one scope that cannot be replayed must not block the workspace.

A real process captures into scopes A and B and dies before writing them, so the next
core to start finds both in the journal and replays them. A's file is made unusable
meanwhile. B must be served in full (status, capture, search, reindex); A's rows must
stay in the journal until A can take them, and then reach A's file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memory_core.base.clock import ManualMonotonic
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm import staging
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.store import undecodable_copy_path
from tests.reliability.support import die_with_journalled, journal_rows

pytestmark = pytest.mark.storage

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")


def long_term(config: Config, scope: ScopeKey) -> Path:
    return MemoryCore(config).workspace.long_term_path(scope)


async def check_bob_is_served(core: MemoryCore, bob_ids: list[str]) -> None:
    status = await core.memories.status(BOB)
    assert {e.id for e in status.active} >= set(bob_ids)
    added, _ = await core.memories.capture(BOB, "practises scales every morning")
    assert [h.ref for h in await core.finder.search(BOB, "cello")] == [bob_ids[0]]
    await core.reindex()
    assert [h.ref for h in await core.finder.search(BOB, "scales morning")] == [added.id]


async def test_a_scope_that_cannot_be_replayed_keeps_its_rows_and_the_rest_is_served(
    config: Config, workspace: Path, monotonic: ManualMonotonic
) -> None:
    ids = await asyncio.to_thread(
        die_with_journalled,
        config,
        [
            (ALICE.value, "owns a red bicycle", False),
            (BOB.value, "plays the cello", False),
            (BOB.value, "lives in Lyon", False),
        ],
    )
    assert journal_rows(config) == {ALICE.value: 1, BOB.value: 2}
    # Where A's file should be, something no one can read as a file.
    blocked = long_term(config, ALICE)
    blocked.mkdir(parents=True)

    async with MemoryCore.open(config, monotonic=monotonic) as core:
        assert {e.id for e in await core.memories.entries(BOB)} == set(ids[BOB.value])
        assert journal_rows(config) == {ALICE.value: 1}
        with pytest.raises(ChatmemError, match=r"LONG_TERM\.md") as caught:
            await core.memories.status(ALICE)
        assert "\n" not in str(caught.value)
        await check_bob_is_served(core, ids[BOB.value])
        assert journal_rows(config) == {ALICE.value: 1}

        # A person clears the way: the next use of A after the backoff takes its kept
        # captures.
        blocked.rmdir()
        monotonic.advance(staging.RETRY_FIRST_SECONDS)
        assert [e.id for e in await core.memories.entries(ALICE)] == ids[ALICE.value]
        assert journal_rows(config) == {}
    assert {e.content for e in parse_memory(blocked.read_text("utf-8")).entries} == {
        "owns a red bicycle"
    }


async def test_kept_rows_survive_the_process_and_a_later_start_replays_them(
    config: Config, workspace: Path
) -> None:
    await asyncio.to_thread(
        die_with_journalled, config, [(ALICE.value, "owns a red bicycle", False)]
    )
    blocked = long_term(config, ALICE)
    blocked.mkdir(parents=True)
    async with MemoryCore.open(config) as core:
        assert await core.memories.entries(BOB) == []
    assert journal_rows(config) == {ALICE.value: 1}  # kept after a clean close too
    blocked.rmdir()
    async with MemoryCore.open(config) as core:
        assert [e.content for e in await core.memories.entries(ALICE)] == ["owns a red bicycle"]
    assert journal_rows(config) == {}


@pytest.mark.slow
async def test_journal_replay_with_one_bad_scope(config: Config, workspace: Path) -> None:
    """The issue's case: A's file holds an invalid UTF-8 byte. A is served too now (item
    6): its damaged block quarantined, its file's bytes kept, its journalled capture
    replayed; and B is served whatever happens to A."""
    ids = await asyncio.to_thread(
        die_with_journalled,
        config,
        [
            (ALICE.value, "likes green tea", True),  # in A's file before the crash
            (ALICE.value, "owns a red bicycle", False),
            (BOB.value, "plays the cello", False),
            (BOB.value, "lives in Lyon", False),
        ],
    )
    path = long_term(config, ALICE)
    damaged = path.read_bytes().replace(b"likes green tea", b"likes gr\xffeen tea")
    path.write_bytes(damaged)
    assert journal_rows(config) == {ALICE.value: 1, BOB.value: 2}

    async with MemoryCore.open(config) as core:
        await check_bob_is_served(core, ids[BOB.value])
        status = await core.memories.status(ALICE)
        assert [e.content for e in status.active] == ["owns a red bicycle"]
        [block] = status.quarantined
        assert "likes gr\\xffeen tea" in block.text
        assert [p.block.text for p in await core.memories.validate()] == [block.text]
    assert journal_rows(config) == {}
    assert undecodable_copy_path(path, damaged).read_bytes() == damaged
