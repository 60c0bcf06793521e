"""Noticing changes made by anyone (a bot, the CLI, a person with an editor) by polling.

A stamp is cheap: `stat` of each scope's long-term file, a listing of each scope's memory
and summary directories, and two numbers from SQLite (`PRAGMA data_version`, which moves when
another connection commits, and the audit log's max id). Comparing two stamps says what to
reload.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.base.workspace import Workspace
from memory_core.engine import MemoryCore

FileMark = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Stamp:
    long_term: dict[str, FileMark | None] = field(default_factory=dict)
    files: dict[str, frozenset[tuple[str, int, int]]] = field(default_factory=dict)
    data_version: int = 0
    audit_id: int = 0


@dataclass(frozen=True, slots=True)
class Changes:
    long_term: frozenset[str] = frozenset()
    """Scopes whose long-term file changed."""
    files: frozenset[str] = frozenset()
    """Scopes whose notes, archives or summaries changed (or scopes that appeared)."""
    database: bool = False
    audit: bool = False

    def __bool__(self) -> bool:
        return bool(self.long_term or self.files or self.database or self.audit)


def _mark(path: Path) -> FileMark | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _listing(directory: Path) -> frozenset[tuple[str, int, int]]:
    found: set[tuple[str, int, int]] = set()
    for folder in (directory, directory / "summary"):
        try:
            with os.scandir(folder) as it:
                for item in it:
                    if item.name.endswith(".md") and item.is_file():
                        st = item.stat()
                        found.add((f"{folder.name}/{item.name}", st.st_mtime_ns, st.st_size))
        except OSError:
            continue
    return frozenset(found)


def file_stamp(
    workspace: Workspace,
) -> tuple[dict[str, FileMark | None], dict[str, frozenset[tuple[str, int, int]]]]:
    """Blocking: run in a thread."""
    long_term: dict[str, FileMark | None] = {}
    files: dict[str, frozenset[tuple[str, int, int]]] = {}
    for scope in workspace.scopes():
        long_term[scope.value] = _mark(workspace.long_term_path(scope))
        files[scope.value] = _listing(workspace.memory_dir(scope))
    return long_term, files


async def take_stamp(core: MemoryCore) -> Stamp:
    long_term, files = await asyncio.to_thread(file_stamp, core.workspace)
    version, audit_id = await core.change_marks()
    return Stamp(long_term, files, version, audit_id)


def compare(old: Stamp, new: Stamp) -> Changes:
    scopes = set(old.long_term) | set(new.long_term)
    return Changes(
        long_term=frozenset(s for s in scopes if old.long_term.get(s) != new.long_term.get(s)),
        files=frozenset(s for s in scopes if old.files.get(s) != new.files.get(s)),
        database=old.data_version != new.data_version,
        audit=old.audit_id != new.audit_id,
    )
