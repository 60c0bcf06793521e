"""The PostgreSQL server goes away mid-run and comes back: nothing acknowledged is lost.

A server of its own (the shared test server must not stop under other tests), stopped
with `pg_ctl stop` and started again on the same data directory and socket.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.storage.spool import SpoolingHistory
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.reliability.support import past_cool_downs
from tests.support import sql

pytestmark = pytest.mark.timeout(180)

ALICE = ScopeKey("peer:alice")


def pg_config(own_postgres: PostgresServer, workspace: Path) -> Config:
    env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": own_postgres.uri}
    return load_config(None, env=env, workspace=workspace)


def history(core: MemoryCore) -> SpoolingHistory:
    spooling = core.history
    assert isinstance(spooling, SpoolingHistory)
    return spooling


async def stored(core: MemoryCore) -> list[tuple[str, str]]:
    rows = await sql(core, "SELECT scope, content FROM messages WHERE role = 'user' ORDER BY id")
    return [(str(r[0]), str(r[1])) for r in rows]


async def test_a_restart_mid_run_loses_nothing(
    own_postgres: PostgresServer,
    tmp_path: Path,
    monotonic: ManualMonotonic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="memory_core")
    clock = ManualClock(START)
    async with MemoryCore.open(
        pg_config(own_postgres, tmp_path / "ws"), clock=clock, monotonic=monotonic
    ) as core:
        await core.conversation.turn(ALICE, "before: the boiler was serviced in May")
        await core.notes.append(MAIN, "before: kayak on the lake")

        await asyncio.to_thread(own_postgres.pause)
        # The turns go on: messages wait in the spool, the files take the memories.
        for n in range(5):
            await core.conversation.turn(ALICE, f"during {n}: the heating is on a timer")
        await core.conversation.turn(MAIN, "during: 我家的猫叫小白")
        entry, _ = await core.memories.capture(ALICE, "keeps bees in the garden")
        await core.memories.capture(ALICE, "the hives are painted blue")
        await core.notes.append(MAIN, "during: sourdough starter fed")
        hits = await core.finder.search(MAIN, "sourdough")
        assert [h.text for h in hits] == ["during: sourdough starter fed"]
        assert history(core).pending == 6
        assert entry.id in {e.id for e in await core.memories.entries(ALICE)}
        outage_lines = [r for r in caplog.records if "unreachable" in r.getMessage()]

        await asyncio.to_thread(own_postgres.resume)
        await past_cool_downs(monotonic, lambda: _spool_written(core))
        assert await stored(core) == [
            (ALICE.value, "before: the boiler was serviced in May"),
            *[(ALICE.value, f"during {n}: the heating is on a timer") for n in range(5)],
            (MAIN.value, "during: 我家的猫叫小白"),
        ]
        # Turns after the outage are stored in order behind the spooled ones.
        await core.conversation.turn(ALICE, "after: all good")
        assert (await stored(core))[-1] == (ALICE.value, "after: all good")
        # The index comes back and holds what was written meanwhile.
        await past_cool_downs(monotonic, lambda: _index_finds(core, MAIN, "sourdough"))
        await past_cool_downs(monotonic, lambda: _index_finds(core, ALICE, "bees"))
    # One warning when the outage began, not one per call.
    spool_lines = [r for r in outage_lines if "messages are kept in" in r.getMessage()]
    assert len(spool_lines) == 1
    audit_lines = [r for r in outage_lines if "audit rows are kept in" in r.getMessage()]
    assert len(audit_lines) == 1
    journal_lines = [r for r in outage_lines if "capture journal unreachable" in r.getMessage()]
    assert len(journal_lines) == 1


async def _spool_written(core: MemoryCore) -> bool:
    return await history(core).flush_spool() and history(core).pending == 0


async def _index_finds(core: MemoryCore, scope: ScopeKey, word: str) -> bool:
    hits = await core.finder.search(scope, word)
    return bool(hits) and core.degraded_reason is None


async def test_a_start_while_the_server_is_down_works_from_files(
    own_postgres: PostgresServer, tmp_path: Path, monotonic: ManualMonotonic
) -> None:
    clock = ManualClock(START)
    config = pg_config(own_postgres, tmp_path / "ws")
    # The workspace has reached its server once: a server never reached must answer at
    # the start (tests/reliability/test_start_around_outage.py).
    async with MemoryCore.open(config, clock=clock):
        pass
    await asyncio.to_thread(own_postgres.pause)
    # The first call that finds the server away marks it down; the calls after it fail at
    # once for as long as the test's monotonic clock stands still.
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        await core.notes.append(MAIN, "written while the server was down")
        assert [h.text for h in await core.finder.search(MAIN, "server")] == [
            "written while the server was down"
        ]
        await core.conversation.turn(MAIN, "a message with nowhere to go but the spool")
        assert history(core).pending == 1
    # The next process, with the server back, writes the spool the first one left.
    await asyncio.to_thread(own_postgres.resume)
    async with MemoryCore.open(config, clock=clock) as core:
        assert await stored(core) == [(MAIN.value, "a message with nowhere to go but the spool")]
        assert not list((tmp_path / "ws" / ".chatmem" / "spool").glob("*.jsonl"))
