"""The testkit parts the many-scopes and big-workspace benches stand on: the generated
files are the product's format and read as a real workspace; a whole process is measured
(peak memory, CPU) and killed at its timeout."""

from __future__ import annotations

import sys
from pathlib import Path

from memory_core.base.entries import Importance, MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_renderer import render_memory
from testkit import many_scopes as gen
from testkit.processes import run


def test_generated_long_term_file_is_what_the_renderer_writes() -> None:
    entries = [
        MemoryEntry(
            id=eid,
            content=text,
            category=category,
            score=score,
            created_at=when,
            last_activated=when,
            scored_at=when,
            importance=Importance.MEDIUM,
        )
        for eid, category, score, when, text in gen.memories(7)
    ]
    assert gen.long_term_text(gen.memories(7)) == render_memory(entries, now=gen.NOW)
    assert gen.long_term_text([]) == render_memory([], now=gen.NOW)


async def test_generated_workspace_reads_as_a_real_one(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert gen.generate(root, range(3)) == 3
    config = load_config(None, env={}, workspace=root)
    scope = ScopeKey.parse(gen.key(1))
    assert Workspace.at(root).memory_dir(scope).name == gen.SLUG.format(n=1)
    async with MemoryCore.open(config, create=False) as core:
        assert set(await core.memories.scopes()) >= {ScopeKey.parse(gen.key(n)) for n in range(3)}
        hits = await core.finder.search(scope, gen.memories(1)[0][4])
        assert any(gen.memories(1)[0][4] in hit.text for hit in hits)


def test_timed_run_measures_the_process_and_kills_it_at_the_timeout() -> None:
    grow = "b = bytearray(80 * 1024 * 1024); print(len(b))"
    done = run([sys.executable, "-c", grow], {}, timeout=60)
    assert done.ok and done.stdout.strip() == str(80 * 1024 * 1024)
    assert done.peak_mb >= 80 and done.cpu > 0
    # A child that never ends by itself: it waits on an event nobody sets.
    stuck = "import threading; threading.Event().wait()"
    slow = run([sys.executable, "-c", stuck], {}, timeout=0.5)
    assert slow.timed_out and not slow.ok and slow.wall < 30
