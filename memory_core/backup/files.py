"""Which workspace files a backup copies, and which lock guards each while it is copied.

A file written by rename (MEMORY.md, archives, snapshots) is whole whenever it is read,
but a writer may be between its `.bak` and the file, and a daily note grows by appends:
each is copied holding the lock its writers hold (`LockRegistry`: lock files, or the
database's advisory locks on PostgreSQL), one lock at a time, so a backup never waits
on two locks at once and never deadlocks with a writer.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memory_core.base.workspace import STATE_DIR

DAILY = re.compile(r"\d{4}-\d{2}-\d{2}\.md")
SKIPPED_DIRS = frozenset(f"{STATE_DIR}/{name}" for name in ("locks", "owners", "parsed", "graphs"))
"""Lock files (held by live processes, meaningless elsewhere), the parse cache and the
vector graphs (both rebuilt from what is restored)."""
DATABASE_FILES = ("index.sqlite3", "journal.sqlite3")
"""SQLite's files are copied through its backup API, never as files (a torn copy)."""
CHUNK = 1 << 20


def lock_of(relative: str) -> str | None:
    """The lock name (`Workspace.lock_name`) guarding the file at `relative` (a POSIX
    path under the workspace), or None for a file replaced whole by rename."""
    parts = PurePosixPath(relative).parts
    if parts in (("MEMORY.md",), ("MEMORY.md.bak",)):
        return "main.memory"
    if parts[:1] == (STATE_DIR,):
        if len(parts) == 3 and parts[1] == "forgotten" and parts[2].endswith(".md"):
            return f"{parts[2].removesuffix('.md')}.forgotten"
        return None
    if parts[:1] != ("memory",):
        return None
    slug, rest = "main", parts[1:]
    if rest[:1] == ("scopes",):
        if len(rest) < 3:
            return None
        slug, rest = rest[1], rest[2:]
    if rest in (("LONG_TERM.md",), ("LONG_TERM.md.bak",)) and slug != "main":
        return f"{slug}.memory"
    if len(rest) == 1 and DAILY.fullmatch(rest[0]):
        return f"{slug}.daily"
    if (len(rest) == 1 and rest[0].endswith(".md")) or rest[:1] == ("summary",):
        return f"{slug}.archive"
    return None


def skipped(relative: str) -> bool:
    """Whether a backup leaves the file out: locks, caches, temporary files, and the
    SQLite databases (copied through their backup API) with their stale copies."""
    path = PurePosixPath(relative)
    if any(str(parent) in SKIPPED_DIRS for parent in path.parents):
        return True
    if path.name.endswith(".tmp"):
        return True
    return path.parent == PurePosixPath(STATE_DIR) and path.name.startswith(DATABASE_FILES)


def workspace_files(root: Path) -> Iterator[str]:
    """Every regular file under `root` a backup copies (POSIX paths relative to it);
    links are not followed (the workspace refuses them) and are left out."""
    for directory, dirs, names in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
        for name in names:
            path = here / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file() or skipped(relative):
                continue
            yield relative


@dataclass(frozen=True, slots=True)
class Copied:
    relative: str
    sha256: str


def copy_file(source: Path, target: Path) -> str | None:
    """Copy `source` to `target` and fsync it; its SHA-256, or None when it went away
    meanwhile (a temporary file renamed, an archive replaced). Blocking."""
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        reader = source.open("rb")
    except FileNotFoundError:
        return None
    with reader, target.open("wb") as writer:
        while chunk := reader.read(CHUNK):
            digest.update(chunk)
            writer.write(chunk)
        writer.flush()
        os.fsync(writer.fileno())
    return digest.hexdigest()
