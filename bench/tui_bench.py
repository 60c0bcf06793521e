"""TUI benchmark: first render and re-sort of the rankings at 1 000, 10 000 and 100 000 entries.

Run `python bench/tui_bench.py [--sizes 1000 10000 100000] [--rounds 3]`. Not a test: it
prints figures and never asserts on wall-clock time.

For each size a workspace whose MEMORY.md holds N entries (`bench/corpus.py`, rendered
with `memory_md_renderer.render_memory`) is opened by the core, then the app runs headless
(`App.run_test`, 160x42) and we time, from the start of `run_test`:

* **first render**: the rankings table holds its first page (the head of the file is
  parsed first, so this does not grow with N);
* **full load**: every entry is parsed (`core.memories.load`) and ranked, the table shows
  the exact ranking and the status line no longer says "loading";
* **warm**: every column's sort keys are computed (a worker does it after the full load);
* **re-sort** by several columns (warm), each timed from the request to the table holding
  the new first page; median over `--rounds`;
* a text filter and a what-if step (+30 days: a new model at another instant).

Core costs outside the TUI (index sync when the core opens) are printed separately.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import machine_load, memory_entries
from textual.widgets import Input

from memory_core.base.clock import ManualClock
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_renderer import render_memory
from tui import ChatmemApp, make_app
from tui.capture import screen_text
from tui.model import ColumnKey
from tui.widgets.ranktable import RankTable

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SIZE = (160, 42)
SORTS: tuple[ColumnKey, ...] = ("hits", "score_30", "to_forget", "id", "score")


async def until(check: Callable[[], bool], limit: float = 120.0, step: float = 0.002) -> float:
    """Seconds until `check()` holds (polling the running app's state)."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > limit:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(step)
    return time.perf_counter() - start


def table(app: ChatmemApp) -> RankTable:
    return app.query_one(RankTable)


def frame(app: ChatmemApp) -> float:
    """Seconds to render the whole screen once: what the next refresh has to paint."""
    start = time.perf_counter()
    screen_text(app)
    return time.perf_counter() - start


async def timed(start: float, check: Callable[[], bool], app: ChatmemApp) -> float:
    """Seconds from `start` until `check()` holds and one frame is painted."""
    await until(check)
    return time.perf_counter() - start + frame(app)


async def measure(ws: Path, n: int, rounds: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    clock = ManualClock(NOW)
    started = time.perf_counter()
    async with MemoryCore.open(Config(workspace=str(ws)), clock=clock) as core:
        figures["core open (index sync)"] = time.perf_counter() - started
        app = make_app(core, clock=clock)
        t0 = time.perf_counter()
        async with app.run_test(size=SIZE) as pilot:
            view = lambda: app.view  # noqa: E731
            figures["first render"] = await timed(
                t0,
                lambda: (v := view()) is not None and v.matching > 0 and table(app).row_count > 0,
                app,
            )
            figures["full load"] = await timed(
                t0, lambda: (v := view()) is not None and v.complete and v.total == n, app
            )
            figures["warm"] = await timed(
                t0, lambda: app.model is not None and app.model.warmed, app
            )
            await pilot.pause(0.2)
            for key in SORTS:
                samples = []
                for _ in range(rounds * 2):  # each column both ways
                    target = app.rankings.sort.toggled(key)
                    start = time.perf_counter()
                    app.sort_by(key)
                    samples.append(
                        await timed(
                            start,
                            lambda target=target: (
                                (v := view()) is not None
                                and v.sort == target
                                and table(app).sort == target
                            ),
                            app,
                        )
                    )
                figures[f"re-sort by {key}"] = statistics.median(samples)
            start = time.perf_counter()
            app.query_one("#rank-filter", Input).value = "coffee"
            figures["filter 'coffee'"] = await timed(
                start, lambda: (v := view()) is not None and v.filter.text == "coffee", app
            )
            start = time.perf_counter()
            await pilot.press("greater_than_sign")
            figures["what-if +30 d"] = await timed(
                start, lambda: (v := view()) is not None and v.offset_days == 30, app
            )
    return figures


def build(ws: Path, n: int) -> float:
    start = time.perf_counter()
    ws.mkdir(parents=True)
    entries = memory_entries(n, now=NOW)
    (ws / "MEMORY.md").write_text(render_memory(entries, now=NOW), encoding="utf-8")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description="TUI first render and re-sort timings")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"tui_bench: {machine_load()}")
    results: dict[int, dict[str, float]] = {}
    root = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    try:
        for n in args.sizes:
            ws = root / f"ws{n}"
            made = build(ws, n)
            size_mb = (ws / "MEMORY.md").stat().st_size / 1e6
            print(
                f"  {n:>7,} entries: MEMORY.md {size_mb:.1f} MB built in {made:.1f} s", flush=True
            )
            results[n] = asyncio.run(measure(ws, n, args.rounds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    names = list(next(iter(results.values())))
    print()
    print(f"{'seconds':<24}" + "".join(f"{n:>12,}" for n in results))
    for name in names:
        print(f"{name:<24}" + "".join(f"{results[n][name]:>12.3f}" for n in results))
    print(f"\n{machine_load()}")
    return 0


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("tui_bench"):
        status = main()
    raise SystemExit(status)
