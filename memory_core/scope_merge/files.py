"""A scope's directory merged into another's (`chatmem scopes --merge`): blocking file
work, run off the event loop by `scope_merge`.

What a scope's directory holds and what becomes of each file:
- a daily note (`YYYY-MM-DD.md`), an event log (`*.jsonl`) and a summary
  (`summary/*.md`): appended to the target's file of the same name (all three are
  append-only files whose parts stand on their own), or moved when the target has none;
- any other file (a raw archive `YYYY-MM-DD-slug.md`, ...): moved, under a new name
  when the target has one of its name;
- what the merge takes over otherwise (the long-term file, whose entries are merged
  by `scope_merge`) or what is rebuilt (the snapshot), the key file, the long-term
  backup, the consolidation state: left in the source directory, which is then set
  aside whole under `.chatmem/merged/`, never deleted.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.base.atomic import fsync_dir

APPENDED = re.compile(r"^(?:\d{4}-\d{2}-\d{2}\.md|.*\.jsonl|summary/[^/]+\.md)$")
"""Files whose copies in two scopes are joined by appending one to the other."""

KEPT_ASIDE = frozenset(
    {
        ".scope",
        "LONG_TERM.md",
        "LONG_TERM.md.bak",
        "MEMORY.md",
        "MEMORY.md.bak",
        "SNAPSHOT.md",
        "consolidation.json",
    }
)
"""Files of the source's top level the merge does not move (see the module docstring)."""


@dataclass
class FilesMerged:
    moved: list[str] = field(default_factory=list)
    appended: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)
    """Moved under a new name (`<stem>.merged-<n><suffix>`): the target had one of the name."""


def merge_directory(source: Path, target: Path) -> FilesMerged:
    """Every file under `source` into `target` (see the module docstring); relative
    paths in the report. The source is never the main scope's `memory/` (which holds
    the other scopes' directories): `scope_merge` refuses to merge main away."""
    report = FilesMerged()
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if path.is_symlink() or not path.is_file():
            continue
        if "/" not in relative and relative in KEPT_ASIDE:
            continue
        if relative.endswith(".tmp") or "/." in f"/{relative}":
            continue  # temporary and hidden files (a torn write's leftovers)
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if not destination.exists():
            os.replace(path, destination)
            report.moved.append(relative)
        elif APPENDED.match(relative):
            append_file(path, destination)
            path.unlink()
            report.appended.append(relative)
        else:
            renamed = free_name(destination)
            os.replace(path, renamed)
            report.renamed.append(renamed.relative_to(target).as_posix())
        fsync_dir(destination.parent)
    return report


def append_file(source: Path, destination: Path) -> None:
    """`source`'s bytes after `destination`'s, on a line of their own."""
    data = source.read_bytes()
    if not data:
        return
    with destination.open("ab") as out:
        size = out.tell()
        if size:
            with destination.open("rb") as existing:
                existing.seek(size - 1)
                if existing.read(1) != b"\n":
                    out.write(b"\n")
        out.write(data if data.endswith(b"\n") else data + b"\n")
        out.flush()
        os.fsync(out.fileno())


def free_name(path: Path) -> Path:
    for number in range(1, 10_000):
        candidate = path.with_name(f"{path.stem}.merged-{number}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise FileExistsError(f"no free name beside {path}")


def set_aside(directory: Path, aside_root: Path, name: str) -> Path | None:
    """Move what is left of a merged scope's directory under `aside_root` (never
    deleted: its long-term file, backup and anything not merged stay readable there).
    None when the directory is gone already."""
    if not directory.is_dir():
        return None
    aside_root.mkdir(parents=True, exist_ok=True)
    destination = aside_root / name
    number = 1
    while destination.exists():
        number += 1
        destination = aside_root / f"{name}.{number}"
    shutil.move(str(directory), str(destination))
    return destination
