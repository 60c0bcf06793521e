"""Smoke: many_scopes_bench and big_workspace_bench run end to end on a tiny size.

Against the checkout only, run by the test environment's interpreter (`--no-compare
--checkout-from-env`: no install, which takes a minute; installs.py has its own tests),
with no warm-up round and one run (many_scopes_bench with one load burner beside it). Figures are printed, never asserted: the test checks
that every row got a figure and no command failed or timed out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"\d+(\.\d+)? (ms|s|MB)")


def _bench(script: str, *args: str, cache: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args, "--cache", str(cache)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def _row(out: str, name: str) -> str:
    lines = [line for line in out.splitlines() if line.strip().startswith(name)]
    assert lines, f"no row {name!r} in:\n{out}"
    return lines[0]


def test_many_scopes_bench_measures_every_command(tmp_path: Path) -> None:
    out = _bench(
        "many_scopes_bench.py",
        *("--scopes", "12", "--runs", "1", "--no-warmup", "--timeout", "120"),
        *("--no-compare", "--checkout-from-env", "--load", "1", "--settle", "0"),
        cache=tmp_path,
    )
    assert "note:" not in out, out
    assert "--load 1" in out  # one CPU-bound process beside it (bench/load.py)
    assert out.count("load average") >= 2  # at the start and at the end
    for row in (
        "first reindex, 12 scopes",
        "first reindex, 1 scope",
        "status, 12 scopes",
        "status, 1 scope",
        "search, 12 scopes",
        "capture, 1 scope",
        "mcp --http start until it answers",
        "scopes",
        "stats",
    ):
        assert FIGURE.search(_row(out, row)), _row(out, row)
    assert re.search(r"[+-]\d+ % wall", _row(out, "status: 12 vs 1 scope"))


def test_big_workspace_bench_measures_every_figure(tmp_path: Path) -> None:
    out = _bench(
        "big_workspace_bench.py",
        *("--entries", "40", "--days", "20", "--runs", "1", "--no-warmup"),
        *("--no-compare", "--checkout-from-env"),
        cache=tmp_path,
    )
    assert "MEMORY.md of 40 entries" in out and "a scope of 20 daily-note files" in out
    for row in (
        "capture: open (MemoryCore.open)",
        "capture: close after it (file written)",
        "search: first search in the open core",
        "chatmem search: whole process",
        "chatmem search: peak memory",
        "chatmem capture: acknowledged",
        "chatmem capture: peak memory",
    ):
        assert FIGURE.search(_row(out, row)), _row(out, row)


def test_a_cached_state_is_written_again_before_the_runs(tmp_path: Path) -> None:
    """The second bench on a cache writes each state once more (`refresh`): its runs see
    the decay of the minutes since, not of however long the cache sat."""
    args = ("--entries", "30", "--only", "memory", "--runs", "1", "--no-warmup")
    args += ("--no-compare", "--checkout-from-env")
    _bench("big_workspace_bench.py", *args, cache=tmp_path)
    [state] = tmp_path.glob("memory-30-*/ws/MEMORY.md")
    entries = state.read_text().count("\n### [")
    out = _bench("big_workspace_bench.py", *args, cache=tmp_path)
    assert FIGURE.search(_row(out, "capture: close after it (file written)"))
    assert state.read_text().count("\n### [") == entries + 1
