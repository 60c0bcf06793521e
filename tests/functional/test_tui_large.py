"""The TUI on a large file: its head first, then everything; and the TUI imports only the core."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from textual.message import Message

from memory_core.base.clock import ManualClock
from memory_core.base.entries import MemoryEntry
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_renderer import render_memory
from tests.functional.tui_support import (
    NOW,
    SIZE,
    Running,
)
from tui import make_app
from tui.messages import RankingsReady
from tui.widgets.ranktable import RankTable

# --- large files -------------------------------------------------------------------------


def big_memory(n: int) -> str:
    rng = random.Random(n)
    entries = []
    for i in range(n):
        last = NOW - timedelta(days=rng.randint(0, 200), seconds=rng.randint(0, 86_399))
        entries.append(
            MemoryEntry(
                id=f"{i:08x}",
                content=f"memory {i} about topic {rng.randint(0, 999)}",
                category=rng.choice(["fact", "preference", "todo", "workflow"]),
                score=rng.uniform(0.05, 1.0),
                created_at=last,
                last_activated=last,
                scored_at=last,
                hits=rng.randint(0, 9),
            )
        )
    return render_memory(entries, now=NOW)


async def test_a_large_file_shows_its_head_first_then_everything(tmp_path: Path) -> None:
    ws = tmp_path / "big"
    ws.mkdir()
    (ws / "MEMORY.md").write_text(big_memory(3000), encoding="utf-8")
    clock = ManualClock(NOW)
    async with MemoryCore.open(Config(workspace=str(ws)), clock=clock) as core:
        seen: list[Message] = []
        app = make_app(core, clock=clock, head_bytes=64 * 1024)
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            run = Running(pilot, app, core, clock, seen)
            await run.settle()
            views = [m.view for m in seen if isinstance(m, RankingsReady)]
            assert not views[0].complete and views[0].matching and views[0].expected_total == 3000
            assert views[-1].complete and views[-1].total == 3000
            assert "3,000 entries" in run.text("#rank-status")
            scores = [r.score for r in views[-1].first_rows(3000)]
            assert scores == sorted(scores, reverse=True)
            table = app.query_one(RankTable)
            last = views[-1].row(2999).entry.id
            await pilot.press("end")
            await run.until(lambda: app.current_id == last, what="the last entry highlighted")
            await run.settle()
            assert table.cursor_row == 2999 and table.cells_at(2999)[0].plain == "3000"
            # only what was on screen was ever turned into cells
            assert len(table._rows) < 100


def test_the_tui_imports_only_the_core() -> None:
    """No adapter (bot) code is needed to inspect a workspace."""
    probe = (
        "import importlib, pkgutil, sys, tui\n"
        "for info in pkgutil.walk_packages(tui.__path__, 'tui.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'adapters', 'telegram', 'dingtalk_stream', 'openai_server'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
