"""Peak memory of `chatmem export` and `chatmem import` on a generated workspace.

The workspace (generated once, not measured): `--scopes` scopes of `--entries` long-term
entries in all (bench/corpus.py's entries, rendered by the core's renderer), and
`--messages` messages in sessions of ten. Each measurement runs in a fresh process of
the tree named (`--tree DIR` for another revision, e.g. a `git worktree` of it; this
checkout by default): `export` writes the whole workspace to a file with
`MemoryCore.export_file`; `import` reads that file into an empty workspace with
`MemoryCore.import_from`. Printed: the process's peak resident size (ru_maxrss) once
the core is open and at the end of the call, and how much the call raised it (what
the export or import itself held). tracemalloc is not used: started in a process
whose threads already run, it crashed this Python (3.11) twice. Not a test.

    python bench/portable_memory.py [--entries 20000] [--scopes 10] [--messages 5000]
                                    [--tree /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


async def generate(root: Path, entries: int, scopes: int, messages: int) -> None:
    from bench.corpus import memory_entries
    from memory_core.base.records import RecordedMessage
    from memory_core.base.scope import ScopeKey
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore
    from memory_core.longterm.memory_md_renderer import render_memory

    now = datetime.now(UTC).replace(microsecond=0)
    made = memory_entries(entries, now=now)
    keys = [ScopeKey("main"), *(ScopeKey(f"peer:user{n}") for n in range(1, scopes))]
    config = load_config(None, env={"CHATMEM_EMBEDDING_PROVIDER": "none"}, workspace=root)
    async with MemoryCore.open(config) as core:
        for n, scope in enumerate(keys):
            core.workspace.ensure_scope(scope)
            path = core.workspace.long_term_path(scope)
            path.write_text(render_memory(made[n::scopes], now=now), encoding="utf-8")
        start = now - timedelta(days=1)
        for n in range(messages // 10):
            said = [
                RecordedMessage(
                    "user" if i % 2 == 0 else "assistant",
                    "",
                    made[(n * 10 + i) % len(made)].content,
                    start + timedelta(seconds=n * 10 + i),
                )
                for i in range(10)
            ]
            await core.record_session(keys[n % scopes], f"s{n}", said[0].at, said)


async def measure(what: str, root: Path, file: Path) -> dict[str, float]:
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    config = load_config(None, env={"CHATMEM_EMBEDDING_PROVIDER": "none"}, workspace=root)
    async with MemoryCore.open(config) as core:
        opened = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        began = time.perf_counter()
        if what == "export":
            count = await core.export_file([], file)
        else:
            _, report = await core.import_from(file)
            count = sum(report.added.values())
        seconds = time.perf_counter() - began
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"records": count, "open_mib": opened, "rss_mib": rss, "seconds": seconds}


def child(args: list[str], tree: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{REPO}"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{args[0]} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--scopes", type=int, default=10)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--tree", type=Path, default=REPO)
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "ROOT", "FILE"))
    args = parser.parse_args()
    if args.child:
        what, root, file = args.child
        if what == "generate":
            asyncio.run(generate(Path(root), args.entries, args.scopes, args.messages))
            print("{}")
        else:
            print(json.dumps(asyncio.run(measure(what, Path(root), Path(file)))))
        return
    with tempfile.TemporaryDirectory(prefix="portable-memory-") as tmp:
        base = Path(tmp)
        sizes = ["--entries", str(args.entries), "--scopes", str(args.scopes)]
        sizes += ["--messages", str(args.messages)]
        subprocess.run(
            [sys.executable, __file__, *sizes, "--child", "generate", str(base / "ws"), "-"],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=True,
        )
        file = base / "export.jsonl"
        exported = child(["export", str(base / "ws"), str(file)], args.tree)
        (base / "copy").mkdir()
        imported = child(["import", str(base / "copy"), str(file)], args.tree)
        size = file.stat().st_size / 2**20
        print(f"tree {args.tree}: {args.entries} entries, {args.messages} messages, "
              f"export file {size:.1f} MiB")  # fmt: skip
        for name, row in (("export", exported), ("import", imported)):
            print(
                f"  {name}: {row['records']:.0f} records, peak RSS {row['open_mib']:.0f} MiB "
                f"open, {row['rss_mib']:.0f} MiB at the end (+{row['rss_mib'] - row['open_mib']:.0f}"
                f" MiB), {row['seconds']:.1f} s"
            )


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("portable_memory"):
        main()
