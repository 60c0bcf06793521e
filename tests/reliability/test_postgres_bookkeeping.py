"""PostgreSQL goes away while captures are made, and a writer is killed with its audit
rows still in its spool: once the server is back, every change made to the memory files
has its audit row, once, and every scope's stored counters equal its rows.

A server of the test's own (`own_postgres`), stopped and started again.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.storage.spool import SpoolingAudit
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.reliability.support import (
    REPO,
    assert_counts_exact,
    past_cool_downs,
    storage_env_of,
)
from tests.support import sql

pytestmark = pytest.mark.timeout(300)

ALICE = ScopeKey("peer:alice")

KILLED_WRITER = """
import asyncio, os, signal
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

async def main() -> None:
    config = load_config(None, env={env!r}, workspace={workspace!r})
    opened = MemoryCore.open(config)  # held: a collected one would close the core
    core = await opened.__aenter__()  # never left: the process is killed
    for n in range({count}):
        entry, _ = await core.memories.capture(ScopeKey("peer:alice"), f"killed writer fact {{n}} zq")
        print(entry.id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # its spool is left behind, its lock let go

asyncio.run(main())
"""


def pg_config(server: PostgresServer, workspace: Path) -> Config:
    env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": server.uri}
    return load_config(None, env=env, workspace=workspace)


async def added_rows(core: MemoryCore) -> dict[str, int]:
    rows = await sql(core, "SELECT entry_id, COUNT(*) FROM audit WHERE action = 'add' GROUP BY 1")
    return {str(r[0]): int(r[1]) for r in rows}


async def test_changes_made_during_an_outage_keep_their_audit_rows(
    own_postgres: PostgresServer, tmp_path: Path, monotonic: ManualMonotonic
) -> None:
    clock = ManualClock(START)
    config = pg_config(own_postgres, tmp_path / "ws")
    async with MemoryCore.open(config, clock=clock, monotonic=monotonic) as core:
        ids = [(await core.memories.capture(ALICE, f"before fact {n} zq"))[0].id for n in range(5)]
        await core.memories.flush()
        await asyncio.to_thread(own_postgres.pause)
        during = [
            (await core.memories.capture(ALICE, f"outage fact {n} zq"))[0].id for n in range(20)
        ]
        await core.memories.flush()
        await core.memories.forget(ALICE, during[0])
        audit = core.audit
        assert isinstance(audit, SpoolingAudit) and audit.pending > 0
        await core.notes.append(MAIN, "a note during the outage")

        await asyncio.to_thread(own_postgres.resume)

        async def written() -> bool:
            return await audit.flush_spool() and audit.pending == 0

        await past_cool_downs(monotonic, written, within=60.0)
        added = await added_rows(core)
        assert {i: added.get(i, 0) for i in ids + during} == dict.fromkeys(ids + during, 1)
        forgets = await sql(core, "SELECT entry_id FROM audit WHERE action = 'forget'")
        assert [str(r[0]) for r in forgets] == [during[0]]
    async with MemoryCore.open(pg_config(own_postgres, tmp_path / "ws"), clock=clock) as core:
        await assert_counts_exact(core)
        assert await added_rows(core) == dict.fromkeys(ids + during, 1)


async def test_a_writer_killed_during_an_outage_loses_no_audit_row(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    config = pg_config(own_postgres, tmp_path / "ws")
    async with MemoryCore.open(config) as core:
        await core.memories.capture(ALICE, "a fact from before zq")
    await asyncio.to_thread(own_postgres.pause)
    script = KILLED_WRITER.format(
        env=storage_env_of(config), workspace=str(config.workspace_path), count=12
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    acknowledged = done.stdout.split()
    assert len(acknowledged) == 12, done.stderr[-2000:]
    assert list((tmp_path / "ws" / ".chatmem" / "spool" / "audit").glob("*.jsonl"))
    await asyncio.to_thread(own_postgres.resume)

    # Two processes start at once with the server back: the dead writer's spool is
    # written once.
    async with MemoryCore.open(config) as first, MemoryCore.open(config) as second:
        for core in (first, second):
            audit = core.audit
            assert isinstance(audit, SpoolingAudit)
            await audit.flush_spool()
        added = await added_rows(first)
        assert {i: added.get(i, 0) for i in acknowledged} == dict.fromkeys(acknowledged, 1)
        entries = {e.id for e in await first.memories.entries(ALICE)}
        assert set(acknowledged) <= entries
        await assert_counts_exact(first)
        hits = await first.finder.search(ALICE, "killed writer fact zq")
        assert hits
    assert not list((tmp_path / "ws" / ".chatmem" / "spool" / "audit").glob("*.jsonl"))
