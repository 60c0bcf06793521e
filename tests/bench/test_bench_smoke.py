"""Smoke: every bench/*.py runs on a tiny size, exits 0 and prints its table's header.

Figures are printed, never asserted (they vary with the machine); the test checks that a
bench still runs after a change to what it drives. Each bench is its own test, so xdist
spreads them over the workers. Run by the test environment's interpreter with this
checkout first on PYTHONPATH, except vector_bench, cli_bench --compare and embedder_bench
--compare, which run installed revisions (testkit/installs.py): they get the session's one
install of this checkout (tests/bench/conftest.py). pg_scale_bench starts a PostgreSQL of its own
(bench/pgbench_server.py, as it does without --dsn); every other bench runs on SQLite.

Modules of bench/ that are not benches (a bench's child script, shared helpers) are
imported, so a broken import shows here too. many_scopes_bench and big_workspace_bench
have their smoke tests in test_bench_smoke_many_scopes.py."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.installs import Install

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


@dataclass(frozen=True)
class Smoke:
    args: tuple[str, ...]
    header: str
    """A line of the bench's table header (text, never a figure)."""


BENCHES = {
    "big_inputs_bench": Smoke(("--cases", "capture"), "case            bytes"),
    "chat_bench": Smoke(("--tiny",), "chat turn overhead excluding the model"),
    "core_bench": Smoke(("--tiny",), "merge + decay (pure functions"),
    "corpus": Smoke(("--quick",), "statistic"),
    "load_bench": Smoke(("--private", "2", "--groups", "1", "--messages", "2"), "load: "),
    "mcp_bench": Smoke(("--tiny",), "median ms  p50 ms  p95 ms  max ms"),
    "peer_bench": Smoke(("--quick", "--chunks", "500", "--queries", "10"), "recall@10"),
    # Hybrid recall of the checkout run from this environment, through the probe.
    "pg_scale_bench": Smoke(
        ("--tiny", "--hybrid", "--rounds", "1", "--no-compare", "--checkout-from-env"),
        "recall median of rounds ms",
    ),
    "portable_memory": Smoke(
        (
            "--entries",
            "10",
            "--scopes",
            "2",
            "--messages",
            "10",
            "--no-compare",
            "--checkout-from-env",
        ),
        "raised MiB",
    ),
    "recall_bench": Smoke(("--quick",), "chunks"),
    "recall_quality": Smoke(
        ("--variant", "bm25", "--sets", "en-a", "--limit", "5", "--jobs", "1"),
        "| dataset | path | mode | variant | n | recall@5",
    ),
    "segmentation_probe": Smoke((), "question/evidence pairs"),
    "tokenizer_bench": Smoke(("--quick",), "dictionary load"),
    "tui_bench": Smoke(("--sizes", "100", "--rounds", "1"), "seconds"),
}
"""Each bench's tiny run and a header line it prints."""

INSTALLED = {
    "cli_bench": Smoke(("--runs", "1", "--captures", "2", "--compare", "."), "after median"),
    # "." installed as a compared revision, beside the checkout run from this environment.
    "embedder_bench": Smoke(
        ("--quick", "--part", "load", "--load-runs", "1", "--compare", ".", "--no-checkout"),
        "Cold load",
    ),
    "vector_bench": Smoke(("--tiny", "--compare", "."), "== restart to steady state"),
}
"""Benches that run installed revisions only: given the session's install cache."""

HELPERS = {
    "corpus_words",
    "embedder_load",
    "embedder_load_child",
    "embedder_search",
    "installs",
    "pg_hybrid_probe",
    "pg_scale_hybrid",
    "pg_scale_rows",
    "pgbench_server",
    "portable_memory_child",
    "recall_measure",
    "recall_report",
    "results",
    "vector_bench_child",
}
"""Modules that are not benches: imported, not run."""

ELSEWHERE = {"many_scopes_bench", "big_workspace_bench", "big_workspace_child", "load", "trees"}
"""bench/ files whose smoke tests live in test_bench_smoke_many_scopes.py (h-many's)."""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "OPENAI_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["TMPDIR"] = str(tmp_path)  # every bench's temporary workspace
    env.setdefault("NO_PROXY", "127.0.0.1,localhost")
    return env


def _run(argv: list[str], tmp_path: Path) -> str:
    done = subprocess.run(
        argv, env=_env(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_every_bench_file_is_smoke_tested() -> None:
    found = {path.stem for path in BENCH.glob("*.py")} - {"__init__"}
    listed = set(BENCHES) | set(INSTALLED) | HELPERS
    assert found - listed - ELSEWHERE == set()
    assert listed - found == set()


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_a_bench_runs_tiny_and_prints_its_table(name: str, tmp_path: Path) -> None:
    smoke = BENCHES[name]
    out = _run([sys.executable, str(BENCH / f"{name}.py"), *smoke.args], tmp_path)
    assert smoke.header in out, out[-3000:]


@pytest.mark.parametrize("name", sorted(INSTALLED))
def test_a_bench_of_installed_revisions_runs_tiny(
    name: str, tmp_path: Path, install_cache: Path, project_install: Install
) -> None:
    smoke = INSTALLED[name]
    argv = [sys.executable, str(BENCH / f"{name}.py"), *smoke.args]
    argv += ["--install-cache", str(install_cache)]
    if name == "vector_bench":
        argv += ["--cache", str(tmp_path)]
    out = _run(argv, tmp_path)
    assert smoke.header in out, out[-3000:]
    # Measured through an install of the cache, not PYTHONPATH. (Not the fixture's own
    # install: a file the run writes into the checkout, e.g. a log, gives "." a new digest.)
    assert f"{install_cache}/worktree-" in out
    assert project_install.root.is_relative_to(install_cache)


def test_the_helper_modules_import(tmp_path: Path) -> None:
    """In one process: each import costs the interpreter's start otherwise."""
    names = ", ".join(sorted(HELPERS))
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import {names}"
    _run([sys.executable, "-c", code], tmp_path)


def test_recall_bench_times_the_reindex_alone(tmp_path: Path) -> None:
    """`--only reindex`: the reindex rows, and no other part of the bench (no queries)."""
    argv = [sys.executable, str(BENCH / "recall_bench.py"), "--quick", "--only", "reindex"]
    out = _run(argv, tmp_path)
    assert "full reindex (MemoryCore.reindex" in out, out[-3000:]
    assert "queries on" not in out and "bulk-inserting" not in out, out[-3000:]
