"""A bot with many users: what one person's command costs when N scopes exist.

Per-peer workspaces of N scopes (one per person: two memories and one daily note each;
`testkit/many_scopes.py` writes them straight to disk, once per size, cached and not timed).
Each tree (the checkout, and each `--compare REV`, by default 2a70d81 and b42d7a9, every
one installed in its own venv as a user installs it: `installs.py`) is driven ONLY through
its `chatmem` command, so any revision can be measured:

* `reindex`: the first `chatmem reindex` of a fresh copy that has no index;
* `status`, `search`, `capture` on one scope: the whole process, wall and CPU (the
  kernel's user + system time of that process), median and p95, beside the same command
  on the same scope in a workspace that holds only it (the issue's "within 10 %");
* `mcp --http` start: `chatmem mcp --http 127.0.0.1:PORT --scope KEY` until it answers
  an MCP `initialize` (the serving command a bot's agents reach; the Telegram and DingTalk
  bots need a platform to start against), then stopped;
* `scopes` and `stats`: the whole process.

Runs of the trees are interleaved (run 1 of every tree, then run 2 ...), after one
untimed warm-up of each command (bytecode files, the page cache). A command past
`--timeout` prints as "> T s (timed out)" and that tree's later commands at that size are
skipped with a note. `--load N` runs N CPU-bound processes beside it (bench/load.py).
Not a test: the figures vary with the machine; the load average is printed at the start
and the end.

    python bench/many_scopes_bench.py [--scopes 1000 10000 100000] [--quick] [--runs N]
        [--compare REV ...] [--no-compare] [--timeout S] [--load N] [--record]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from load import add_load_argument, burners, load_now
from trees import Tree, add_tree_arguments, trees_for

from testkit import many_scopes as gen
from testkit.processes import Run, free_port, run, serving_start

SIZES = (1_000, 10_000, 100_000)
QUICK = 200
ONE_SCOPE_COMMANDS = ("status", "search", "capture")
CAPTURE_TEXT = "the many scopes bench captured this at {n}"


@dataclass
class Cell:
    """One figure of one tree at one size: its runs, or why there are none."""

    runs: list[Run] = field(default_factory=list)
    problem: str | None = None


@dataclass
class Sized:
    """Everything measured at one size, by tree label then row name."""

    size: int
    scope: int
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dead: dict[str, str] = field(default_factory=dict)
    """Trees whose later commands are skipped at this size, and why."""


# --- workspaces ----------------------------------------------------------------------


def source(cache: Path, size: int, scope: int) -> tuple[Path, Path]:
    """The generated workspace of `size` scopes and the one holding only `scope` (made
    once: a `done` marker is written last)."""
    pair = []
    for name, numbers in ((f"src-{size}", range(size)), (f"src-one-{scope}", [scope])):
        where = cache / name
        if not (where / "done").exists():
            shutil.rmtree(where, ignore_errors=True)
            started = time.perf_counter()
            made = gen.generate(where / "ws", numbers)
            (where / "done").write_text("")
            took = time.perf_counter() - started
            print(
                f"  generated {made} scopes in {took:.1f} s ({name})", file=sys.stderr, flush=True
            )
        pair.append(where / "ws")
    return pair[0], pair[1]


def fresh_copy(src: Path, target: Path, scope: int) -> None:
    """A copy of `src` at `target`: scope files no command writes are hard links (100 000
    scopes copied would take minutes); the measured scope and MEMORY.md are real copies.
    The product replaces a long-term file whole (atomically), so a link is never written."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(src), str(target)], check=True)
    for rel in (Path("memory/scopes") / gen.SLUG.format(n=scope), Path("MEMORY.md")):
        path = target / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        subprocess.run(["cp", "-a", str(src / rel), str(path)], check=True)


# --- commands ------------------------------------------------------------------------


def argv(tree: Tree, ws: Path, config: Path, scope: int | None, *command: str) -> list[str]:
    where = ["--workspace", str(ws), "--config", str(config)]
    if scope is not None:
        where += ["--scope", gen.key(scope)]
    return [*tree.chatmem, *where, *command]


def command_for(name: str, scope: int) -> tuple[str, ...]:
    if name == "search":
        return ("search", query_for(scope))
    if name == "capture":
        return ("capture", CAPTURE_TEXT.format(n=time.time_ns()))
    return (name,)


def query_for(scope: int) -> str:
    """Words of the measured scope's own memory, so the search finds something."""
    return gen.memories(scope)[0][4].split(" ", 2)[2]


def measure_one(
    sized: Sized, tree: Tree, row: str, timeout: float, cmd: list[str], url: str | None = None
) -> Run | None:
    """Run `cmd` (a server answering at `url`, when given) unless the tree is skipped at
    this size; keep its figure, or why it has none."""
    if tree.label in sized.dead:
        return None
    if url is None:
        got = run(cmd, tree.env, timeout=timeout)
    else:
        got = serving_start(cmd, tree.env, url, timeout=timeout)
    cell = sized.cells.setdefault(tree.label, {}).setdefault(row, Cell())
    if got.timed_out:
        cell.problem = f"> {timeout:.0f} s (timed out)"
        sized.dead[tree.label] = f"{row} timed out"
        sized.notes.append(f"{tree.label}: {row} timed out after {timeout:.0f} s; later skipped")
    elif not got.ok:
        tail = (got.stderr.strip().splitlines() or ["(no output)"])[-1][:160]
        cell.problem = f"failed (exit {got.returncode})"
        sized.notes.append(f"{tree.label}: {row} failed: {tail}")
    else:
        cell.runs.append(got)
    return got


def measure_size(
    trees: Sequence[Tree],
    cache: Path,
    config: Path,
    size: int,
    runs: int,
    timeout: float,
    warmup: bool = True,
) -> Sized:
    scope = size // 2
    many_src, one_src = source(cache, size, scope)
    sized = Sized(size=size, scope=scope)
    spaces: dict[str, tuple[Path, Path]] = {}
    for tree in trees:
        many, one = (cache / "runs" / f"{tree.key}-{kind}" / "ws" for kind in ("many", "one"))
        fresh_copy(many_src, many, scope)
        fresh_copy(one_src, one, scope)
        spaces[tree.label] = (many, one)
        for ws, row in ((many, "reindex"), (one, "reindex, one scope")):
            cmd = argv(tree, ws, config, None, "reindex")
            measure_one(sized, tree, row, timeout, cmd)
        print(f"  {tree.label}: reindexed ({load_now()})", file=sys.stderr, flush=True)

    def one_round(timed: bool) -> None:
        for tree in trees:
            many, one = spaces[tree.label]
            for name in ONE_SCOPE_COMMANDS:
                for ws, where in ((many, f"{size} scopes"), (one, "1 scope")):
                    cmd = argv(tree, ws, config, scope, *command_for(name, scope))
                    if timed:
                        measure_one(sized, tree, f"{name}, {where}", timeout, cmd)
                    elif tree.label not in sized.dead:
                        run(cmd, tree.env, timeout=timeout)
            for name in ("scopes", "stats"):
                cmd = argv(tree, many, config, None, name)
                if timed:
                    measure_one(sized, tree, name, timeout, cmd)
            if timed:
                port = free_port()
                cmd = argv(tree, many, config, scope, "mcp", "--http", f"127.0.0.1:{port}")
                url = f"http://127.0.0.1:{port}/mcp"
                measure_one(sized, tree, "mcp --http start", timeout, cmd, url)

    if warmup:
        one_round(timed=False)
    for number in range(runs):
        one_round(timed=True)
        print(f"  run {number + 1}/{runs} done ({load_now()})", file=sys.stderr, flush=True)
    return sized


# --- the table -----------------------------------------------------------------------


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "skipped"
    if not cell.runs:
        return cell.problem or "-"
    walls = [r.wall for r in cell.runs]
    cpu = statistics.median(r.cpu for r in cell.runs)
    if len(walls) == 1:
        return f"{seconds(walls[0])}, cpu {seconds(cpu)}"
    return f"{seconds(statistics.median(walls))} / {seconds(p95(walls))}, cpu {seconds(cpu)}"


def waits_text(cell: Cell | None) -> str:
    """Where the wall time beyond the CPU time went: waiting (voluntary switches: I/O,
    locks) or preempted (involuntary: another process had the CPU), medians."""
    if cell is None or not cell.runs:
        return "-"
    gap = statistics.median(r.wall - r.cpu for r in cell.runs)
    waited = statistics.median(r.waits for r in cell.runs)
    preempted = statistics.median(r.preempted for r in cell.runs)
    return f"{seconds(max(gap, 0.0))}: {waited:.0f} w / {preempted:.0f} p"


def ratio_text(many: Cell | None, one: Cell | None) -> str:
    if many is None or one is None or not many.runs or not one.runs:
        return "-"
    wall = statistics.median(r.wall for r in many.runs) / statistics.median(
        r.wall for r in one.runs
    )
    cpu_one = statistics.median(r.cpu for r in one.runs)
    cpu = statistics.median(r.cpu for r in many.runs) / cpu_one if cpu_one else float("nan")
    return f"{(wall - 1) * 100:+.0f} % wall, {(cpu - 1) * 100:+.0f} % cpu"


def table(sized: Sized, labels: Sequence[str]) -> list[str]:
    n = sized.size
    rows: list[tuple[str, Callable[[str], str]]] = []

    def plain(row: str) -> Callable[[str], str]:
        return lambda label: cell_text(sized.cells.get(label, {}).get(row))

    def versus(name: str) -> Callable[[str], str]:
        return lambda label: ratio_text(
            sized.cells.get(label, {}).get(f"{name}, {n} scopes"),
            sized.cells.get(label, {}).get(f"{name}, 1 scope"),
        )

    rows.append((f"first reindex, {n} scopes", plain("reindex")))
    rows.append(("first reindex, 1 scope", plain("reindex, one scope")))
    for name in ONE_SCOPE_COMMANDS:
        rows.append((f"{name}, {n} scopes", plain(f"{name}, {n} scopes")))
        rows.append((f"{name}, 1 scope", plain(f"{name}, 1 scope")))
        rows.append((f"{name}: {n} vs 1 scope", versus(name)))
    rows.append(("mcp --http start until it answers", plain("mcp --http start")))
    rows.append(("scopes", plain("scopes")))
    rows.append(("stats", plain("stats")))
    waits = [
        (f"{name}, {where}", f"{name}, {where}")
        for name in ONE_SCOPE_COMMANDS
        for where in (f"{n} scopes", "1 scope")
    ]
    waits += [(row, row) for row in ("reindex", "mcp --http start", "scopes")]
    width = 34
    out = [
        f"\n{n} scopes (scope {gen.key(sized.scope)} measured); wall median / p95, "
        "cpu median (user + system of the process)",
        f"  {'':<36}" + "".join(f"{label:>{width}}" for label in labels),
    ]
    for name, figure in rows:
        out.append(f"  {name:<36}" + "".join(f"{figure(label):>{width}}" for label in labels))
    out.append(
        "  beyond the CPU time (wall - cpu): switches waiting (w: I/O, locks) / "
        "preempted (p: the CPU was busy)"
    )
    for name, row in waits:
        out.append(
            f"  {name:<36}"
            + "".join(
                f"{waits_text(sized.cells.get(label, {}).get(row)):>{width}}" for label in labels
            )
        )
    out.extend(f"  note: {note}" for note in sized.notes)
    return out


def main(argv_: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scopes", type=int, nargs="+", default=list(SIZES), metavar="N")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK} scopes, 2 runs")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=600.0, help="per command, seconds")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chatmem-many-scopes-bench",
        help="where generated workspaces and each tree's copies are kept",
    )
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed first round (smoke tests)"
    )
    add_tree_arguments(parser)
    add_load_argument(parser)
    args = parser.parse_args(argv_)
    if args.quick:
        args.scopes, args.runs = [QUICK], min(args.runs, 2)
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    config = cache / "words.toml"
    config.write_text('[embedding]\nprovider = "none"\n')
    trees = trees_for(args, extras=("mcp",), cache=cache)
    with burners(args.load, settle_seconds=args.settle):
        print(f"many scopes bench, --load {args.load}; at the start: {load_now()}")
        for tree in trees:
            print(f"  {tree.label}: {' '.join(tree.chatmem)}")
        for size in args.scopes:
            sized = measure_size(
                trees, cache, config, size, args.runs, args.timeout, not args.no_warmup
            )
            print("\n".join(table(sized, [t.label for t in trees])), flush=True)
        print(f"\nat the end: {load_now()}")
    return 0


if __name__ == "__main__":
    from results import recorded_main
    from trees import with_default_compare

    sys.argv[1:] = with_default_compare(sys.argv[1:])
    with recorded_main("many_scopes_bench"):
        code = main()
    sys.exit(code)
