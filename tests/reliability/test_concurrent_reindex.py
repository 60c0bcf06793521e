"""Six processes on one workspace: three reindex it again and again while three write
notes and captures (one of the writers is killed with SIGKILL midway). Afterwards, on
both backends: no chunk row doubled (one per path and line), every scope's stored
counters equal to its rows, and every acknowledged note found in the index once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest

from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from tests.reliability.support import REPO, assert_counts_exact, storage_env_of
from tests.support import DOUBLED, sql

pytestmark = [pytest.mark.storage, pytest.mark.slow, pytest.mark.timeout(600)]

REINDEXERS = 3
WRITERS = 3
NOTES = 30
REINDEXES = 3
SEED_DAYS = 300
ALICE = ScopeKey("peer:alice")

REINDEXER = """
import asyncio
from memory_core.config import load_config
from memory_core.engine import MemoryCore

async def main() -> None:
    config = load_config(None, env={env!r}, workspace={workspace!r})
    async with MemoryCore.open(config) as core:
        for _ in range({times}):
            await core.reindex()
            print("reindexed", flush=True)

asyncio.run(main())
"""

WRITER = """
import asyncio
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.base.scope import ScopeKey

async def main() -> None:
    config = load_config(None, env={env!r}, workspace={workspace!r})
    async with MemoryCore.open(config) as core:
        for n in range({notes}):
            scope = ScopeKey("main" if n % 2 else "peer:alice")
            await core.notes.append(scope, f"w{name}n{{n}}zq note about the shed")
            print("note", scope.value, f"w{name}n{{n}}zq", flush=True)
            if n % 6 == 0:
                entry, _ = await core.memories.capture(scope, f"c{name}n{{n}}zq keeps a kayak")
                print("capture", scope.value, f"c{name}n{{n}}zq", flush=True)

asyncio.run(main())
"""


def start(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_lines(process: subprocess.Popen[str], count: int, within: float) -> list[str]:
    """The first `count` lines the process prints (fewer if it ends first)."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + within
    while len(lines) < count and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
    return lines


async def test_reindexes_beside_writers_and_a_kill_double_nothing(config: Config) -> None:
    async with MemoryCore.open(config, create=True) as core:
        # Daily files enough for several rebuild groups: writes land between a
        # rebuild's reset and its last group.
        today = core.now()
        for n in range(SEED_DAYS):
            day = today - timedelta(days=n + 1)
            await core.notes.append(MAIN if n % 2 else ALICE, f"seed {n} garden", now=day)
    env, workspace = storage_env_of(config), str(config.workspace_path)
    writers = [
        start(WRITER.format(env=env, workspace=workspace, notes=NOTES, name=w))
        for w in range(WRITERS)
    ]
    reindexers = [
        start(REINDEXER.format(env=env, workspace=workspace, times=REINDEXES))
        for _ in range(REINDEXERS)
    ]
    # The last writer dies with SIGKILL once it has acknowledged a third of its notes.
    victim = writers[-1]
    acknowledged = await asyncio.to_thread(wait_for_lines, victim, NOTES // 3, 240.0)
    os.kill(victim.pid, signal.SIGKILL)
    outputs = [victim.communicate(timeout=60)[0]]
    for process in [*writers[:-1], *reindexers]:
        out, err = await asyncio.to_thread(process.communicate, timeout=500)
        assert process.returncode == 0, err[-2000:]
        outputs.append(out)
    lines = acknowledged + [line for out in outputs for line in out.splitlines()]
    assert sum(line == "reindexed" for line in lines) == REINDEXERS * REINDEXES
    notes = {tuple(line.split()[1:]) for line in lines if line.startswith("note ")}
    captures = {tuple(line.split()[1:]) for line in lines if line.startswith("capture ")}
    assert len(notes) >= (WRITERS - 1) * NOTES + NOTES // 3 - NOTES // 6

    async with MemoryCore.open(config) as core:
        assert await sql(core, DOUBLED) == [(0,)]
        await assert_counts_exact(core)
        for scope, token in sorted(notes):
            hits = await core.finder.search(ScopeKey(scope), SearchRequest(token, limit=20))
            texts = [h.text for h in hits if token in h.text]
            rows = await sql(core, "SELECT COUNT(*) FROM chunks WHERE text LIKE ?", f"%{token}%")
            df = await sql(core, "SELECT df FROM terms WHERE term = ?", token)
            assert len(texts) == 1, (scope, token, texts, rows, df)
        for scope, token in sorted(captures):
            assert any(token in e.content for e in await core.memories.entries(ScopeKey(scope)))
