"""Peak memory of `chatmem export` and `chatmem import` on a generated workspace, for each
tree measured.

The workspace: `--scopes` scopes of `--entries` long-term entries in all (bench/corpus.py's
entries, rendered by this checkout's renderer into each scope's MEMORY.md), and
`--messages` messages in sessions of ten; its texts are made once here and written by
each tree itself (not measured). Each tree is this checkout and each `--compare REV` (by
default 2a70d81 and b42d7a9), installed in its own venv as a user installs it
(bench/trees.py; `--checkout-from-env` runs the checkout with this interpreter instead),
and every step runs in a fresh process of that tree's python running
bench/portable_memory_child.py, a small script stable across revisions: `export` writes
the whole workspace to a file with `MemoryCore.export_file`; `import` reads that file
into an empty workspace with `MemoryCore.import_from`. Printed: the process's peak
resident size (ru_maxrss) once the core is open and at the end of the call, and how much
the call raised it (what the export or import itself held); a revision without export
or import gets a "not measurable" line. tracemalloc is not used: started in a process
whose threads already run, it crashed this Python (3.11) twice. Not a test.

    python bench/portable_memory.py [--entries 20000] [--scopes 10] [--messages 5000]
                                    [--compare REV ...] [--no-compare] [--checkout-from-env]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from corpus import machine_load, table  # noqa: E402
from installs import InstallError  # noqa: E402
from trees import Tree, add_tree_arguments, trees_for, with_default_compare  # noqa: E402

CHILD = HERE / "portable_memory_child.py"


class Unmeasurable(Exception):
    """A tree without what the bench drives (the message says what)."""


def workspace_spec(entries: int, scopes: int, messages: int) -> dict[str, object]:
    """Each scope's MEMORY.md text and the sessions' messages, for the child to write."""
    from corpus import memory_entries

    from memory_core.longterm.memory_md_renderer import render_memory

    now = datetime.now(UTC).replace(microsecond=0)
    made = memory_entries(entries, now=now)
    keys = ["main", *(f"peer:user{n}" for n in range(1, scopes))]
    memory = {key: render_memory(made[n::scopes], now=now) for n, key in enumerate(keys)}
    start = now - timedelta(days=1)
    sessions = [
        [
            keys[n % scopes],
            f"s{n}",
            [
                [
                    "user" if i % 2 == 0 else "assistant",
                    made[(n * 10 + i) % len(made)].content,
                    (start + timedelta(seconds=n * 10 + i)).isoformat(),
                ]
                for i in range(10)
            ],
        ]
        for n in range(messages // 10)
    ]
    return {"memory": memory, "sessions": sessions}


def child(tree: Tree, what: str, root: Path, file: Path) -> dict[str, float]:
    """One fresh process of `tree` running the child; its figures."""
    done = subprocess.run(
        [str(tree.python), str(CHILD), what, str(root), str(file)],
        env=tree.env,
        cwd=root.parent,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(
            f"{what} with {tree.label} failed (exit {done.returncode}): {done.stderr[-2000:]}"
        )
    out = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if "unmeasurable" in out:
        raise Unmeasurable(str(out["unmeasurable"]))
    return out


def measure_tree(tree: Tree, spec: Path, base: Path) -> list[list[object]]:
    """The workspace written by `tree`, exported and imported: a table row for each."""
    base.mkdir()
    child(tree, "generate", base / "ws", spec)
    file = base / "export.jsonl"
    exported = child(tree, "export", base / "ws", file)
    (base / "copy").mkdir()
    imported = child(tree, "import", base / "copy", file)
    size = f"{file.stat().st_size / 2**20:.1f}"
    rows: list[list[object]] = []
    for name, row in (("export", exported), ("import", imported)):
        rows.append(
            [
                tree.label,
                name,
                f"{row['records']:.0f}",
                size,
                f"{row['open_mib']:.0f}",
                f"{row['rss_mib']:.0f}",
                f"+{row['rss_mib'] - row['open_mib']:.0f}",
                f"{row['seconds']:.1f}",
            ]
        )
    shutil.rmtree(base)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--scopes", type=int, default=10)
    parser.add_argument("--messages", type=int, default=5_000)
    add_tree_arguments(parser)
    args = parser.parse_args()
    try:
        trees = trees_for(args)
    except InstallError as error:
        raise SystemExit(f"error: {error}") from None
    rows: list[list[object]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="portable-memory-") as tmp:
        spec = Path(tmp) / "spec.json"
        made = workspace_spec(args.entries, args.scopes, args.messages)
        spec.write_text(json.dumps(made, ensure_ascii=False), encoding="utf-8")
        for number, tree in enumerate(trees):
            print(f"  tree {tree.label}: {tree.python}", flush=True)
            try:
                rows += measure_tree(tree, spec, Path(tmp) / f"tree-{number}")
            except Unmeasurable as why:
                notes.append(f"not measurable at {tree.label}: {why}")
    print(
        f"\nPeak memory of export and import, one fresh process each: {args.entries} entries"
        f" in {args.scopes} scopes, {args.messages} messages ({machine_load()})"
    )
    headers = ["tree", "call", "records", "file MiB", "peak RSS open MiB", "at the end MiB"]
    print(table([*headers, "raised MiB", "s"], rows))
    for note in notes:
        print(note)


if __name__ == "__main__":
    from results import recorded_main

    sys.argv[1:] = with_default_compare(sys.argv[1:])
    with recorded_main("portable_memory"):
        main()
