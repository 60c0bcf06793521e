"""MEMORY.md on disk: cached reads, and read-modify-write under the scope's locks.

Every write takes the scope's lock (tasks and processes), copies the current file to
`.bak`, writes a temp file, fsyncs and renames, so a crash at any instant leaves either
the old or the new file. Reads are cached by (mtime, size, inode) so a bot does not
re-parse a large file on every turn, yet sees edits made by a person or another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from memory_core.atomic import backup_then_write
from memory_core.entries import MemoryEntry
from memory_core.errors import StoreError
from memory_core.locks import LockRegistry
from memory_core.memory_md import (
    ParsedMemory,
    QuarantinedBlock,
    parse_memory,
    render_memory_lines,
    split_sections,
)
from memory_core.scope import ScopeKey
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)

T = TypeVar("T")
Stamp = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A parsed file and the stat it was parsed at."""

    parsed: ParsedMemory
    stamp: Stamp | None


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def read_memory_file(path: Path, archive_below: float) -> Snapshot:
    """Blocking read + parse; callers run it in a thread."""
    stamp = _stamp(path)
    if stamp is None:
        return Snapshot(ParsedMemory(), None)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path} is not UTF-8 text: {exc}") from exc
    parsed = parse_memory(text, archive_below=archive_below)
    for block in parsed.quarantined:
        log.warning(
            "%s:%d: block quarantined (%s); it is kept verbatim, run `chatmem validate`",
            path,
            block.line,
            block.reason,
        )
    return Snapshot(parsed, stamp)


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """What the last write of a scope replaced and produced: enough for the index to update
    only the entries that changed, and to know whether it was in step with the old file."""

    before: list[MemoryEntry]
    after: ParsedMemory
    before_stamp: Stamp | None
    after_stamp: Stamp | None


class LongTermStore:
    def __init__(
        self, workspace: Workspace, locks: LockRegistry, archive_below: float = 0.2
    ) -> None:
        self._ws = workspace
        self._locks = locks
        self._archive_below = archive_below
        self._cache: dict[ScopeKey, Snapshot] = {}
        self._checked_at: dict[ScopeKey, float] = {}
        self.last_write: dict[ScopeKey, WriteRecord] = {}
        self.settle: Callable[[ScopeKey], Awaitable[None]] | None = None
        """Writes the scope's staged captures (`staging.py`) before any read or write, so
        readers see them and writes stay in order."""

    def path(self, scope: ScopeKey) -> Path:
        return self._ws.long_term_path(scope)

    async def load(self, scope: ScopeKey, *, max_age: float = 0.0) -> ParsedMemory:
        """The scope's entries as on disk (parsed again only when the file changed).

        `max_age` lets a hot path (a chat turn) reuse a check made less than that many
        seconds ago instead of a stat per call; writes by this process are always seen.
        """
        if self.settle is not None:
            await self.settle(scope)
        return await self.load_unsettled(scope, max_age=max_age)

    async def load_unsettled(self, scope: ScopeKey, *, max_age: float = 0.0) -> ParsedMemory:
        """`load` without writing staged captures first (the staging's own reads)."""
        path = self.path(scope)
        cached = self._cache.get(scope)
        checked = self._checked_at.get(scope)
        if cached is not None and checked is not None and time.monotonic() - checked < max_age:
            return cached.parsed
        stamp = await asyncio.to_thread(_stamp, path)
        self._checked_at[scope] = time.monotonic()
        if cached is not None and cached.stamp == stamp:
            return cached.parsed
        snapshot = await asyncio.to_thread(read_memory_file, path, self._archive_below)
        self._cache[scope] = snapshot
        return snapshot.parsed

    async def update(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
    ) -> T:
        """Apply `change` to the current file under the scope's locks and write the result.

        `change` is pure: it gets what is on disk and returns the new entries plus any
        value for the caller. Quarantined blocks are carried over untouched.
        """
        if self.settle is not None:
            await self.settle(scope)
        return await self.update_unsettled(scope, change, now)

    async def update_unsettled(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
    ) -> T:
        """`update` without writing staged captures first (the staging's own write)."""
        async with self._locks.hold(self._ws.lock_name(scope, "memory")):
            # One worker call for the whole read-change-write: `change` is pure, and every
            # hop to a thread costs more than the small file's own I/O.
            before, after, result = await asyncio.to_thread(self._apply, scope, change, now)
            self.last_write[scope] = WriteRecord(
                before=before.parsed.entries,
                after=after.parsed,
                before_stamp=before.stamp,
                after_stamp=after.stamp,
            )
            return result

    def _apply(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
    ) -> tuple[Snapshot, Snapshot, T]:
        self._ws.ensure_scope(scope)
        snapshot = self._current(scope, self.path(scope))
        entries, result = change(snapshot.parsed)
        after = self._write(scope, entries, snapshot.parsed.quarantined, now)
        return snapshot, after, result

    def _current(self, scope: ScopeKey, path: Path) -> Snapshot:
        """Under the lock: the cached parse if the file is still the one we cached."""
        cached = self._cache.get(scope)
        if cached is not None and cached.stamp is not None and cached.stamp == _stamp(path):
            return cached
        return read_memory_file(path, self._archive_below)

    def _write(
        self,
        scope: ScopeKey,
        entries: list[MemoryEntry],
        quarantined: list[QuarantinedBlock],
        now: datetime,
    ) -> Snapshot:
        path = self.path(scope)
        text, lines = render_memory_lines(
            entries, quarantined, now=now, archive_below=self._archive_below
        )
        _remove_stale_temps(path)
        backup_then_write(path, text, self._ws.backup_path(scope))
        # The entries we rendered are what a re-read would give (the format round-trips),
        # so cache them against the new stat and spare the next load a parse.
        active, archived = split_sections(entries, self._archive_below)
        parsed = ParsedMemory(entries=active + archived, quarantined=list(quarantined), lines=lines)
        snapshot = Snapshot(parsed, _stamp(path))
        self._cache[scope] = snapshot
        return snapshot


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files (`.MEMORY.md.*.tmp`, `.MEMORY.md.bak.*.tmp`) left by writers that
    died mid-write. Only the holder of the scope's lock writes them, and we hold it."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


_TOTAL = re.compile(rb"<!-- Total entries: (\d+) -->")
_BLOCK = b"\n### "


def read_head(
    path: Path, archive_below: float, max_bytes: int
) -> tuple[list[MemoryEntry], int | None] | None:
    """The first whole blocks of a large file; None when the file is small (read it all)."""
    try:
        if os.stat(path).st_size <= max_bytes:
            return None
        with open(path, "rb") as handle:
            data = handle.read(max_bytes)
    except FileNotFoundError:
        return None
    cut = data.rfind(_BLOCK)
    if cut <= 0:
        return None
    total = _TOTAL.search(data)
    parsed = parse_memory(data[: cut + 1].decode("utf-8", "replace"), archive_below=archive_below)
    return list(parsed.entries), int(total.group(1)) if total else None
