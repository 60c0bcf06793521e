"""Reading a scope's long-term entries for the TUI, fast first and complete second.

MEMORY.md is written sorted by score, so its first blocks are the top of the rankings. For a
large file the TUI parses only its head first (a first screen in milliseconds), then the
whole file through the core (`MemoryCore.load`, which caches by file stamp). Reads never take
the scope's lock: the core writes by atomic rename, so a read sees the old or the new file.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from memory_core.engine import MemoryCore
from memory_core.entries import MemoryEntry
from memory_core.memory_md import parse_memory
from memory_core.scope import ScopeKey

HEAD_BYTES = 192 * 1024
"""Files larger than this are shown from their head first (about 700 entries)."""
_TOTAL = re.compile(rb"<!-- Total entries: (\d+) -->")
_BLOCK = b"\n### "


@dataclass(frozen=True, slots=True)
class EntriesSnapshot:
    scope: ScopeKey
    entries: list[MemoryEntry] = field(repr=False)
    complete: bool
    expected_total: int | None = None


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


class EntryLoader:
    """Loads through the core, one load per scope at a time so concurrent panes share it."""

    def __init__(self, core: MemoryCore, head_bytes: int = HEAD_BYTES) -> None:
        self.core = core
        self.head_bytes = head_bytes
        self._locks: dict[ScopeKey, asyncio.Lock] = {}

    async def load(self, scope: ScopeKey) -> list[MemoryEntry]:
        async with self._locks.setdefault(scope, asyncio.Lock()):
            return await self.core.entries(scope)

    async def head(self, scope: ScopeKey) -> EntriesSnapshot | None:
        """The first entries of a large file (None for a small one: load it whole)."""
        head = await asyncio.to_thread(
            read_head, self.core.store.path(scope), self.core.policy.archive_below, self.head_bytes
        )
        if head is None:
            return None
        entries, expected = head
        return EntriesSnapshot(scope, entries, False, expected)
