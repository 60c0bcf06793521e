"""Large workspaces: how long a person waits to open them, capture and search.

Two workspaces, generated once (not timed) and cached by size in `--cache`:

* `memory`: a main-scope MEMORY.md of `--entries` entries in the real format (rendered
  by memory_core's own renderer from `bench/corpus.py`'s entries, about 450 bytes each,
  so 114 000 entries are about 51 MB);
* `days`: a main scope with `--days` daily-note files (`memory/YYYY-MM-DD.md`, one to
  four notes each, one file per day back from yesterday).

Each tree measured (each `--compare REV`, by default 2a70d81 and b42d7a9, then this
checkout) is installed in its own venv as a user installs it (`installs.py`: non-editable,
its own pyproject's dependencies) and reached only through its `chatmem` or its own
interpreter running `big_workspace_child.py`, a small script stable across revisions, so
any revision since the flat layout can be measured. Each first indexes its own copy once
(the state a bot restarts into: the index has seen every file). Then, for every run, a
fresh copy of that state (file times kept, MEMORY.md linked: the same file a restarted bot
finds, so its parse-cache stamp vouches) is opened in a fresh process, as a bot or a
command would:

* `open`: `MemoryCore.open` until it yields a core that can answer;
* `capture`: a capture right after the open (acknowledged: it returned), then `close`
  (the captures written to MEMORY.md);
* `search`: the first search in the open core, and (`later`) the first one
  `recall.sync_min_interval_seconds` after it, as a running bot's;
* `chatmem search`: the whole process: wall, CPU (user + system) and peak memory (the
  largest resident set), read from the kernel by wait4;
* `chatmem capture`: the whole process: when its line is printed (acknowledged), when it
  exits, its CPU time and peak memory.

The indexed state each run starts from is a workspace that has been used: opened once
(every file indexed) and written once (a capture, and the close that writes it), as a
bot leaves it; a cached state is written once more at each bench's start (`refresh`).
That first open and write are timed once and printed (the cost of an upgrade, or of a
file made elsewhere).

The children run with their install's bytecode files after a warm-up run, as a user's
install has .pyc files. Embeddings are off unless `--vectors` (the vector index is
another part's figure). Runs of the trees alternate, so they see the same load; medians
are printed with the range, and the load average at the start and the end (`--load N`
adds N CPU-bound processes: bench/load.py). Not a test: the figures vary with the machine.

    python bench/big_workspace_bench.py [--quick] [--entries N] [--days N] [--runs N]
        [--compare REV ...] [--no-compare] [--only memory days] [--load N] [--record]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from big_workspace_child import CAPTURE_TEXT
from load import add_load_argument, burners, load_now
from trees import Tree, add_tree_arguments, trees_for

from testkit.processes import Run, run
from testkit.workspace_copies import check_unchanged, copy_workspace, long_term_stamp

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AGE_SECONDS = 3600
"""Generated files are dated this far back: a file this old is past every "racy" window,
as the files of a workspace a bot restarts into are."""
QUERY = "项目 deadline meeting 周五"
CHILD = HERE / "big_workspace_child.py"
CLI_TIMEOUT = 3600.0
QUICK = 300


# --- generating the workspaces (this checkout's code; not timed) ---------------------


def _age(paths: list[Path]) -> None:
    stamp = time.time() - AGE_SECONDS
    for path in paths:
        os.utime(path, (stamp, stamp))


def generate_memory(target: Path, entries: int) -> None:
    """A main-scope MEMORY.md of `entries` entries, rendered by the core's renderer."""
    sys.path.insert(0, str(REPO))
    import random

    from bench.corpus import memory_entries, sentences
    from memory_core.longterm.decay import decay_all
    from memory_core.longterm.memory_md_renderer import render_memory

    now = datetime.now(UTC).replace(microsecond=0)
    # Entries as a file a bot keeps holds them: decayed to now, the forgotten gone.
    made = decay_all(memory_entries(entries, now=now), now).entries
    # corpus sentences are 20-120 characters; real memories run longer: one in two
    # gets a second sentence and one in four a third, for about 450 bytes an entry.
    extra = iter(sentences(entries, seed=7))
    rng = random.Random(7)
    longer = []
    for entry in made:
        text = entry.content
        for share in (0.5, 0.25):
            if rng.random() < share:
                text += (" " if text.isascii() else "") + next(extra)
        longer.append(_with_content(entry, text))
    text = render_memory(longer, now=now)
    target.mkdir(parents=True, exist_ok=True)
    path = target / "MEMORY.md"
    path.write_text(text, encoding="utf-8")
    _age([path])


def _with_content(entry: Any, text: str) -> Any:
    from dataclasses import replace

    return replace(entry, content=text)


def generate_days(target: Path, days: int) -> None:
    """`days` daily-note files of the main scope, one per day back from yesterday."""
    sys.path.insert(0, str(REPO))
    import random

    from bench.corpus import sentences

    rng = random.Random(11)
    texts = iter(sentences(days * 3, seed=11))
    folder = target / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    last = date.today() - timedelta(days=1)
    written = []
    for back in range(days):
        day = last - timedelta(days=back)
        notes = []
        for _ in range(rng.choice((1, 2, 3, 4))):
            when = f"{rng.randrange(8, 23):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
            notes.append(f"- {when} {next(texts, 'a quiet day')}")
        path = folder / f"{day.isoformat()}.md"
        path.write_text(f"# {day.isoformat()}\n\n" + "\n".join(sorted(notes)) + "\n")
        written.append(path)
    _age(written)


# --- preparing each tree's indexed state --------------------------------------------


def run_child(tree: Tree, workspace: Path, action: str, config: Path) -> dict[str, float]:
    """One phase measurement by the tree's own interpreter (`big_workspace_child.py`)."""
    spec = {"workspace": str(workspace), "action": action, "config": str(config), "query": QUERY}
    done = subprocess.run(
        [str(tree.python), str(CHILD), json.dumps(spec)],
        capture_output=True,
        env=tree.env,
        cwd=str(workspace.parent),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed ({tree.label}, {action}):\n{done.stderr.decode()[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def cli_argv(tree: Tree, workspace: Path, config: Path, *command: str) -> list[str]:
    return [*tree.chatmem, "--workspace", str(workspace), "--config", str(config), *command]


def run_cli_capture(tree: Tree, workspace: Path, config: Path) -> dict[str, float]:
    """`chatmem capture` as a person runs it: when its answer is printed, when it exits,
    and the process's CPU time and peak memory (the kernel's, through wait4)."""
    argv = cli_argv(tree, workspace, config, "capture", CAPTURE_TEXT.format(n=time.time_ns()))
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, env=tree.env, cwd=str(workspace.parent)
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        acknowledged = time.perf_counter() - started
        proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        exited = time.perf_counter() - started
        err.seek(0)
        if proc.returncode != 0 or not line:
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"chatmem capture failed ({tree.label}): {tail}")
    return {
        "cli ack": acknowledged,
        "cli exit": exited,
        "cli cpu": usage.ru_utime + usage.ru_stime,
        "cli peak": usage.ru_maxrss / 1024.0,
    }


def run_cli_search(tree: Tree, workspace: Path, config: Path) -> dict[str, float]:
    """A whole `chatmem search` process: wall, CPU and peak memory."""
    got: Run = run(
        cli_argv(tree, workspace, config, "search", QUERY),
        tree.env,
        timeout=CLI_TIMEOUT,
        cwd=workspace.parent,
    )
    if not got.ok:
        raise SystemExit(f"chatmem search failed ({tree.label}): {got.stderr[-2000:]}")
    return {"search cli": got.wall, "search cli cpu": got.cpu, "search cli peak": got.peak_mb}


def prepared(
    tree: Tree, cache: Path, kind: str, size: int, source: Path, config: Path
) -> tuple[Path, float]:
    """The tree's indexed copy of a generated workspace (made once), and how long its
    first open (the whole index built) took when it was made."""
    base = cache / f"{kind}-{size}-{tree.key}"
    ws = base / "ws"
    marker = base / "indexed.json"
    if not marker.exists():
        base.mkdir(parents=True, exist_ok=True)
        copy_workspace(source, ws, link_days=kind == "days")
        started = time.perf_counter()
        run_child(tree, ws, "prepare", config)
        seconds = time.perf_counter() - started
        marker.write_text(json.dumps({"seconds": seconds}))
    else:
        refresh(tree, ws, config)
    settle(tree, ws, config)
    return ws, float(json.loads(marker.read_text())["seconds"])


def refresh(tree: Tree, ws: Path, config: Path) -> None:
    """A cached state written once more (a capture and its close), at this bench's start.
    A write decays every entry whose day rolled over since the last one (a few percent of
    a large file an hour), so a state the cache kept for hours made each run's close
    rescore and re-sort thousands of entries, more the older the cache: now the runs see
    the minutes since this write, as a bot that has been running does."""
    (ws.parent / "settled").unlink(missing_ok=True)
    run_child(tree, ws, "capture", config)


RACY_SECONDS = 3.0
"""Past the parse cache's racy window (2 s after the file's last change): a stamp recorded
later vouches for the file without hashing it."""


def settle(tree: Tree, ws: Path, config: Path) -> None:
    """One search on the prepared state, once it is past the racy window of its last write,
    so the state's parse-cache stamp vouches for its MEMORY.md, as in a workspace that a
    bot wrote a while ago (the run copies link that file: `copy_workspace`)."""
    marker = ws.parent / "settled"
    if marker.exists():
        return
    written = (ws / "MEMORY.md").stat().st_mtime
    while time.time() - written < RACY_SECONDS:
        time.sleep(0.2)
    run_child(tree, ws, "search", config)
    marker.write_text("")


# --- the report ---------------------------------------------------------------------


def fmt(values: list[float], unit: str = "") -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if unit == "MB":
        if len(values) == 1:
            return f"{med:.0f} MB"
        return f"{med:.0f} MB ({min(values):.0f}-{max(values):.0f})"
    unit, scale = ("ms", 1000.0) if med < 1.0 else ("s", 1.0)
    if len(values) == 1:
        return f"{med * scale:.{0 if unit == 'ms' else 2}f} {unit}"
    low, high = min(values) * scale, max(values) * scale
    digits = 0 if unit == "ms" else 2
    return f"{med * scale:.{digits}f} {unit} ({low:.{digits}f}-{high:.{digits}f})"


ROWS = [
    ("open (MemoryCore.open)", "capture: open"),
    ("open, CPU time", "capture: open cpu"),
    ("first capture acknowledged", "capture: capture"),
    ("first capture, CPU time", "capture: capture cpu"),
    ("close after it (file written)", "capture: close"),
    ("close, CPU time", "capture: close cpu"),
    ("open (MemoryCore.open)", "search: open"),
    ("open, CPU time", "search: open cpu"),
    ("first search in the open core", "search: search"),
    ("first search, CPU time", "search: search cpu"),
    ("whole process, open+search", "search: process"),
    ("a search 2 s after the open", "later: search"),
    ("that search, CPU time", "later: search cpu"),
    ("chatmem search: whole process", "search cli"),
    ("chatmem search: CPU time", "search cli cpu"),
    ("chatmem search: peak memory", "search cli peak"),
    ("chatmem capture: acknowledged", "cli ack"),
    ("chatmem capture: exited", "cli exit"),
    ("chatmem capture: CPU time", "cli cpu"),
    ("chatmem capture: peak memory", "cli peak"),
]


def generate(kind: str, size: int, source: Path) -> None:
    """The generated workspace, made in a fresh interpreter: a process keeps the memory it
    grew, and Linux counts a child's resident set before its exec in the child's peak, so a
    bench that had made 100 000 entries itself would add its own ~300 MB to every
    `chatmem` it measures afterwards."""
    make = generate_memory if kind == "memory" else generate_days
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(make, source, size).result()


def measure(
    kind: str,
    size: int,
    trees: Sequence[Tree],
    cache: Path,
    config: Path,
    runs: int,
    warmup: bool,
) -> None:
    source = cache / f"src-{kind}-{size}"
    if not (source / "done").exists():
        started = time.perf_counter()
        shutil.rmtree(source, ignore_errors=True)
        generate(kind, size, source)
        (source / "done").write_text("")
        print(f"  generated {kind} {size} in {time.perf_counter() - started:.0f} s", flush=True)
    states = {}
    for tree in trees:
        ws, seconds = prepared(tree, cache, kind, size, source, config)
        states[tree.label] = ws
        print(
            f"  {tree.label}: first open and write of the generated files: {seconds:.1f} s",
            flush=True,
        )
    actions = ["capture", "search", "later", "cli", "cli search"]
    if kind == "days":
        actions = ["search", "later", "cli search"]
    figures: dict[str, dict[str, list[float]]] = {tree.label: {} for tree in trees}
    scratch = cache / "runs"
    for number in range(0 if warmup else 1, runs + 1):  # run 0 warms up (.pyc, page cache)
        for tree in trees:
            for action in actions:
                ws = scratch / "ws"
                copy_workspace(states[tree.label], ws, link_days=kind == "days")
                stamp = long_term_stamp(states[tree.label])
                if action == "cli":
                    got = run_cli_capture(tree, ws, config)
                elif action == "cli search":
                    got = run_cli_search(tree, ws, config)
                else:
                    got = run_child(tree, ws, action, config)
                    got = {f"{action}: {k}": v for k, v in got.items()}
                check_unchanged(states[tree.label], stamp)
                if number:
                    for name, value in got.items():
                        figures[tree.label].setdefault(name, []).append(value)
    if kind == "memory":
        path = states[trees[0].label] / "MEMORY.md"
        title = f"MEMORY.md of {size} entries ({path.stat().st_size / 1e6:.1f} MB)"
    else:
        title = f"a scope of {size} daily-note files"
    labels = [tree.label for tree in trees]
    print(f"\n{title}, {runs} runs, median (min-max); {load_now()}")
    # A child's peak counts at least the bench's own resident set when it was started.
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  (the bench's own peak: {own:.0f} MB, a floor under the peak memory rows)")
    print(f"  {'':<42}" + "".join(f"{label:>26}" for label in labels))
    for name, key in ROWS:
        if all(key not in figures[label] for label in labels):
            continue
        prefix = key.split(":")[0] + ": " if ":" in key else ""
        unit = "MB" if key.endswith("peak") else ""
        print(
            f"  {prefix + name:<42}"
            + "".join(f"{fmt(figures[label].get(key, []), unit):>26}" for label in labels)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=114_000)
    parser.add_argument("--days", type=int, default=100_000)
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK} entries, {QUICK} days, 1 run"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed first run (smoke tests)"
    )
    parser.add_argument("--only", nargs="*", choices=("memory", "days"), default=None)
    parser.add_argument("--vectors", action="store_true", help="keep embeddings on")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chatmem-big-workspace-bench",
        help="where generated and indexed workspaces are kept between runs",
    )
    add_tree_arguments(parser)
    add_load_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.entries, args.days, args.runs = QUICK, QUICK, 1
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    config = cache / ("vectors.toml" if args.vectors else "words.toml")
    config.write_text("" if args.vectors else '[embedding]\nprovider = "none"\n')
    trees = trees_for(args, extras=("mcp", "vector") if args.vectors else ("mcp",), cache=cache)
    with burners(args.load, settle_seconds=args.settle):
        print(f"big workspace bench, --load {args.load}; at the start: {load_now()}")
        for tree in trees:
            print(f"  {tree.label}: {tree.python}")
        for kind in args.only or ["memory", "days"]:
            size = args.entries if kind == "memory" else args.days
            measure(kind, size, trees, cache, config, args.runs, not args.no_warmup)
        print(f"\nat the end: {load_now()}")


if __name__ == "__main__":
    from results import recorded_main
    from trees import with_default_compare

    sys.argv[1:] = with_default_compare(sys.argv[1:])
    with recorded_main("big_workspace_bench"):
        main()
