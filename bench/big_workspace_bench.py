"""Large workspaces: how long a person waits to open them, capture and search.

Two workspaces, generated once (not timed) and cached by size in `--cache`:

* `memory`: a main-scope MEMORY.md of `--entries` entries in the real format (rendered
  by memory_core's own renderer from `bench/corpus.py`'s entries, about 450 bytes each,
  so 114 000 entries are about 51 MB);
* `days`: a main scope with `--days` daily-note files (`memory/YYYY-MM-DD.md`, one to
  four notes each, one file per day back from yesterday).

Each source tree measured (this checkout, and `--tree DIR` for the previous revision,
e.g. a `git archive` of it unpacked in DIR; `PYTHONPATH=DIR` runs that tree's code with
this environment's packages) first indexes its own copy once (the state a bot restarts
into: the index has seen every file). Then, for every run, a fresh copy of that state
(file times kept) is opened in a fresh process, as a bot or a command would:

* `open`: `MemoryCore.open` until it yields a core that can answer;
* `capture`: `core.memories.capture` right after the open (acknowledged: it returned),
  then `close` (the captures written to MEMORY.md);
* `search`: the first `core.finder.search` right after the open, and (`later`) the
  first one `recall.sync_min_interval_seconds` after it, as a running bot's;
* `cli capture`: the whole `chatmem capture` process: when its line is printed
  (acknowledged) and when it exits.

The indexed state each run starts from is a workspace that has been used: opened once
(every file indexed) and written once (a capture, and the close that writes it), as a
bot leaves it. That first open and write are timed once and printed (the cost of an
upgrade, or of a file made elsewhere).

The children run with bytecode caching on (in `PYTHONPYCACHEPREFIX` under the cache
directory, so no tree is written to) after a warm-up run, as a user's install has .pyc
files. Embeddings are off unless `--vectors` (the vector index is another part's
figure). Runs of the trees alternate, so both see the same load; medians are printed
with the range. Not a test: the figures vary with the machine.

    python bench/big_workspace_bench.py [--quick] [--entries N] [--days N] [--runs N]
                                        [--tree /work/base] [--only memory days]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.recall.request import SearchRequest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AGE_SECONDS = 3600
"""Generated files are dated this far back: a file this old is past every "racy" window,
as the files of a workspace a bot restarts into are."""
CAPTURE_TEXT = "the big workspace bench captured this line at {n}"
QUERY = "项目 deadline meeting 周五"


# --- the child: one measurement in a fresh process -----------------------------------


def child(spec: dict[str, Any]) -> dict[str, float]:
    """Run in a fresh interpreter whose `memory_core` is the tree under test. Each phase
    is timed twice: wall time, and the process's CPU time (`... cpu`), which another
    process's load changes far less."""
    started = time.perf_counter()
    from memory_core.base.scope import MAIN
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    imported = time.perf_counter()
    config = load_config(spec["config"], env={}, workspace=spec["workspace"])
    out: dict[str, float] = {"import": imported - started}
    marks: list[tuple[float, float]] = []

    def mark(name: str | None = None) -> None:
        now = (time.perf_counter(), time.process_time())
        if name is not None:
            out[name] = now[0] - marks[-1][0]
            out[f"{name} cpu"] = now[1] - marks[-1][1]
        marks.append(now)

    async def run() -> None:
        create = spec["action"] == "prepare"
        mark()
        async with MemoryCore.open(config, create=create) as core:
            mark("open")
            if spec["action"] in ("capture", "prepare"):
                await core.memories.capture(MAIN, CAPTURE_TEXT.format(n=time.time_ns()))
                mark("capture")
            elif spec["action"] in ("search", "later"):
                if spec["action"] == "later":
                    # A running bot: the open's sync is older than the stale interval.
                    await asyncio.sleep(config.recall.sync_min_interval_seconds + 0.2)
                    mark()
                await core.finder.search(MAIN, SearchRequest(spec["query"], limit=10))
                mark("search")
            mark()
        mark("close")

    asyncio.run(run())
    out["process"] = time.perf_counter() - started
    return out


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


def tree_key(tree: Path) -> str:
    """Each tree indexes its own copy; the copy is made again when the tree's core changes
    (its schema or index code may have)."""
    digest = hashlib.blake2b(str(tree).encode(), digest_size=8)
    for path in sorted((tree / "memory_core").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def child_env(tree: Path, cache: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHATMEM_", "OPENAI_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = str(tree)  # before the editable install's finder
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache" / tree_key(tree))
    return env


def copy_workspace(source: Path, target: Path, link_days: bool) -> None:
    """A copy that keeps every file's times (what the index compares); daily notes, which
    nothing measured writes, are hard links (100 000 copies would take minutes)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if link_days:
        subprocess.run(["cp", "-al", str(source), str(target)], check=True)
        state = target / ".chatmem"
        if state.exists():
            shutil.rmtree(state)
            subprocess.run(["cp", "-a", str(source / ".chatmem"), str(state)], check=True)
        for name in ("MEMORY.md",):
            if (target / name).exists():
                (target / name).unlink()
                subprocess.run(["cp", "-a", str(source / name), str(target / name)], check=True)
    else:
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)


def run_child(
    tree: Path, cache: Path, workspace: Path, action: str, config: Path
) -> dict[str, float]:
    spec = {"workspace": str(workspace), "action": action, "config": str(config), "query": QUERY}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
        capture_output=True,
        env=child_env(tree, cache),
        cwd=str(workspace.parent),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed ({tree}, {action}):\n{done.stderr.decode()[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def run_cli_capture(tree: Path, cache: Path, workspace: Path, config: Path) -> dict[str, float]:
    """`chatmem capture` as a person runs it: when its answer is printed, when it exits."""
    argv = [
        sys.executable,
        "-m",
        "adapters.cli",
        "capture",
        CAPTURE_TEXT.format(n=time.time_ns()),
        "--workspace",
        str(workspace),
        "--config",
        str(config),
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(tree, cache),
        cwd=str(workspace.parent),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    acknowledged = time.perf_counter() - started
    _, err = proc.communicate()
    exited = time.perf_counter() - started
    if proc.returncode != 0 or not line:
        raise SystemExit(f"chatmem capture failed ({tree}): {err.decode()[-2000:]}")
    return {"acknowledged": acknowledged, "exit": exited}


def prepared(
    tree: Path, cache: Path, kind: str, size: int, source: Path, config: Path
) -> tuple[Path, float]:
    """The tree's indexed copy of a generated workspace (made once), and how long its
    first open (the whole index built) took when it was made."""
    base = cache / f"{kind}-{size}-{tree_key(tree)}"
    ws = base / "ws"
    marker = base / "indexed.json"
    if marker.exists():
        return ws, float(json.loads(marker.read_text())["seconds"])
    base.mkdir(parents=True, exist_ok=True)
    copy_workspace(source, ws, link_days=kind == "days")
    started = time.perf_counter()
    run_child(tree, cache, ws, "prepare", config)
    seconds = time.perf_counter() - started
    marker.write_text(json.dumps({"seconds": seconds}))
    return ws, seconds


# --- the report ---------------------------------------------------------------------


def fmt(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    unit, scale = ("ms", 1000.0) if med < 1.0 else ("s", 1.0)
    if len(values) == 1:
        return f"{med * scale:.{0 if unit == 'ms' else 2}f} {unit}"
    low, high = min(values) * scale, max(values) * scale
    digits = 0 if unit == "ms" else 2
    return f"{med * scale:.{digits}f} {unit} ({low:.{digits}f}-{high:.{digits}f})"


def machine_load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def measure(
    kind: str,
    size: int,
    trees: list[tuple[str, Path]],
    cache: Path,
    config: Path,
    runs: int,
) -> None:
    source = cache / f"src-{kind}-{size}"
    if not (source / "done").exists():
        started = time.perf_counter()
        shutil.rmtree(source, ignore_errors=True)
        (generate_memory if kind == "memory" else generate_days)(source, size)
        (source / "done").write_text("")
        print(f"  generated {kind} {size} in {time.perf_counter() - started:.0f} s", flush=True)
    states = {}
    for label, tree in trees:
        ws, seconds = prepared(tree, cache, kind, size, source, config)
        states[label] = ws
        print(
            f"  {label}: first open and write of the generated files: {seconds:.1f} s", flush=True
        )
    actions = ["capture", "search", "later", "cli"] if kind == "memory" else ["search", "later"]
    figures: dict[str, dict[str, list[float]]] = {label: {} for label, _ in trees}
    scratch = cache / "runs"
    for run in range(runs + 1):  # run 0 warms up (.pyc files, the page cache)
        for label, tree in trees:
            for action in actions:
                ws = scratch / "ws"
                copy_workspace(states[label], ws, link_days=kind == "days")
                if action == "cli":
                    got = run_cli_capture(tree, cache, ws, config)
                    got = {"cli ack": got["acknowledged"], "cli exit": got["exit"]}
                else:
                    got = run_child(tree, cache, ws, action, config)
                    got = {f"{action}: {k}": v for k, v in got.items()}
                if run:
                    for name, value in got.items():
                        figures[label].setdefault(name, []).append(value)
    if kind == "memory":
        path = states[trees[0][0]] / "MEMORY.md"
        title = f"MEMORY.md of {size} entries ({path.stat().st_size / 1e6:.1f} MB)"
    else:
        title = f"a scope of {size} daily-note files"
    rows = [
        ("open (MemoryCore.open)", "capture: open"),
        ("open, CPU time", "capture: open cpu"),
        ("first capture acknowledged", "capture: capture"),
        ("first capture, CPU time", "capture: capture cpu"),
        ("close after it (file written)", "capture: close"),
        ("close, CPU time", "capture: close cpu"),
        ("open (MemoryCore.open)", "search: open"),
        ("open, CPU time", "search: open cpu"),
        ("first search", "search: search"),
        ("first search, CPU time", "search: search cpu"),
        ("whole process, open+search", "search: process"),
        ("a search 2 s after the open", "later: search"),
        ("that search, CPU time", "later: search cpu"),
        ("chatmem capture: acknowledged", "cli ack"),
        ("chatmem capture: exited", "cli exit"),
    ]
    labels = [label for label, _ in trees]
    print(f"\n{title}, {runs} runs, median (min-max)")
    print(f"  {'':<42}" + "".join(f"{label:>26}" for label in labels))
    for name, key in rows:
        if all(key not in figures[label] for label in labels):
            continue
        prefix = key.split(":")[0] + ": " if ":" in key else ""
        print(
            f"  {prefix + name:<42}"
            + "".join(f"{fmt(figures[label].get(key, [])):>26}" for label in labels)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=114_000)
    parser.add_argument("--days", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="5 000 entries, 5 000 days")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="the previous revision's tree (before)")
    parser.add_argument(
        "--after", type=Path, default=REPO, help="the tree measured as after (default: this one)"
    )
    parser.add_argument("--only", nargs="*", choices=("memory", "days"), default=None)
    parser.add_argument("--vectors", action="store_true", help="keep embeddings on")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chatmem-big-workspace-bench",
        help="where generated and indexed workspaces are kept between runs",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.quick:
        args.entries, args.days = 5_000, 5_000
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    config = cache / ("vectors.toml" if args.vectors else "words.toml")
    config.write_text("" if args.vectors else '[embedding]\nprovider = "none"\n')
    trees = []
    if args.tree is not None:
        trees.append(("before", args.tree.resolve()))
    trees.append(("after" if args.tree is not None else "this tree", args.after.resolve()))
    print(f"big workspace bench; {machine_load()}")
    for label, tree in trees:
        print(f"  {label}: {tree}")
    kinds = args.only or ["memory", "days"]
    for kind in kinds:
        measure(
            kind, args.entries if kind == "memory" else args.days, trees, cache, config, args.runs
        )
    print(f"\n{machine_load()}")


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("big_workspace_bench"):
        main()
