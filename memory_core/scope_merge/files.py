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

from memory_core.base import safe_files
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


def merge_directory(source: Path, target: Path, *, root: Path) -> FilesMerged:
    """Every file under `source` into `target` (see the module docstring); relative
    paths in the report. The source is never the main scope's `memory/` (which holds
    the other scopes' directories): `scope_merge` refuses to merge main away. Both lie
    inside the workspace `root`, and every file is written through its boundary."""
    report = FilesMerged()
    safe_files.inside(root, source)
    safe_files.make_dirs(root, target)
    for path in sorted(source.rglob("*")):  # links to folders are not followed
        relative = path.relative_to(source).as_posix()
        if path.is_symlink() or not path.is_file():
            continue
        if "/" not in relative and relative in KEPT_ASIDE:
            continue
        if relative.endswith(".tmp") or "/." in f"/{relative}":
            continue  # temporary and hidden files (a torn write's leftovers)
        destination = target / relative
        safe_files.make_dirs(root, destination.parent)
        if safe_files.file_stat(root, destination) is None:
            os.replace(path, destination)  # a rename: never through a link
            report.moved.append(relative)
        elif APPENDED.match(relative):
            append_file(path, destination, root=root)
            path.unlink()
            report.appended.append(relative)
        else:
            renamed = free_name(destination)
            os.replace(path, renamed)
            report.renamed.append(renamed.relative_to(target).as_posix())
        fsync_dir(destination.parent)
    return report


def append_file(source: Path, destination: Path, *, root: Path) -> None:
    """`source`'s bytes after `destination`'s, on a line of their own."""
    data = safe_files.read_bytes(root, source, safe_files.NOTE_BYTES)
    if not data:
        return
    fd = safe_files.open_fd(root, destination, os.O_RDWR | os.O_APPEND)
    with os.fdopen(fd, "r+b") as out:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
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


def set_aside(directory: Path, aside_root: Path, name: str, *, root: Path) -> Path | None:
    """Move what is left of a merged scope's directory under `aside_root` (never
    deleted: its long-term file, backup and anything not merged stay readable there).
    None when the directory is gone already."""
    if not safe_files.inside(root, directory).is_dir():
        return None
    safe_files.make_dirs(root, aside_root)
    destination = aside_root / name
    number = 1
    while destination.exists():
        number += 1
        destination = aside_root / f"{name}.{number}"
    shutil.move(str(directory), str(destination))
    return destination
