"""Write a text capture of the TUI on the demo workspace (for the README).

    python scripts/capture_demo.py                 # -> docs/demo-screen.txt
    python scripts/capture_demo.py --tab archive --scope telegram:peer:20010002

The demo is built in a temporary directory as of a fixed instant, with entry ids made
reproducible, so re-running the script only changes the file when the screen changed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import tempfile
import time
from datetime import datetime
from pathlib import Path

from textual.worker import WorkerState

import memory_core.longterm.merge as merge
from adapters.demo import build_demo
from memory_core.base.clock import ManualClock, parse_when
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tui import ChatmemApp, make_app
from tui.capture import screen_text

ROOT = Path(__file__).resolve().parent.parent
TABS = {"rankings": "1", "entry": "2", "archive": "3", "recall": "4", "activity": "5"}


def reproducible_ids() -> None:
    counter = itertools.count(1)

    def next_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
        while True:
            candidate = hashlib.sha256(str(next(counter)).encode()).hexdigest()[:8]
            if candidate not in taken:
                return candidate

    merge.new_entry_id = next_id  # type: ignore[assignment]


async def wait_until_loaded(app: ChatmemApp, pause: float = 0.05, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        await asyncio.sleep(pause)
        busy = any(
            w.group != "watch" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            for w in app.workers
        )
        ready = app.view is not None and app.view.complete
        quiet = quiet + 1 if ready and not busy else 0


async def capture(args: argparse.Namespace) -> str:
    now: datetime = parse_when(args.now)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "chatmem-demo"
        reproducible_ids()
        await build_demo(workspace, now=now)
        clock = ManualClock(now)
        async with MemoryCore.open(Config(workspace=str(workspace)), clock=clock) as core:
            app = make_app(core, clock=clock, scope=ScopeKey(args.scope))
            async with app.run_test(size=(args.width, args.height)) as pilot:
                await wait_until_loaded(app)
                if args.tab != "rankings":
                    await pilot.press(TABS[args.tab])
                    await wait_until_loaded(app)
                return screen_text(app)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "demo-screen.txt")
    parser.add_argument("--now", default="2026-03-01T12:00:00Z", help="the demo's 'now'")
    parser.add_argument("--scope", default="main")
    parser.add_argument("--tab", choices=sorted(TABS), default="rankings")
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=40)
    args = parser.parse_args()
    text = asyncio.run(capture(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
