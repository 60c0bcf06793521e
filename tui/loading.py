"""Reading a scope's long-term entries for the TUI, fast first and complete second.

MEMORY.md is written sorted by score, so its first blocks are the top of the rankings. For a
large file the TUI parses only its head first (a first screen in milliseconds), then the
whole file through the core (`core.memories.entries`, cached by file stamp). Reads never take
the scope's lock: the core writes by atomic rename, so a read sees the old or the new file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore

HEAD_BYTES = 192 * 1024
"""Files larger than this are shown from their head first (about 700 entries)."""


@dataclass(frozen=True, slots=True)
class EntriesSnapshot:
    scope: ScopeKey
    entries: list[MemoryEntry] = field(repr=False)
    complete: bool
    expected_total: int | None = None


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A block of the long-term file the parser could not read: kept verbatim in the
    file (never lost), shown so a person can fix it."""

    line: int
    reason: str
    text: str


class EntryLoader:
    """Loads through the core, one load per scope at a time so concurrent panes share it."""

    def __init__(self, core: MemoryCore, head_bytes: int = HEAD_BYTES) -> None:
        self.core = core
        self.head_bytes = head_bytes
        self._locks: dict[ScopeKey, asyncio.Lock] = {}

    async def load(self, scope: ScopeKey) -> list[MemoryEntry]:
        async with self._locks.setdefault(scope, asyncio.Lock()):
            return await self.core.memories.entries(scope)

    async def quarantined(self, scope: ScopeKey) -> list[Quarantined]:
        """The scope's quarantined blocks (the same cached parse `load` reads)."""
        async with self._locks.setdefault(scope, asyncio.Lock()):
            parsed = await self.core.memories.load(scope)
        return [Quarantined(b.line, b.reason, b.text) for b in parsed.quarantined]

    async def head(self, scope: ScopeKey) -> EntriesSnapshot | None:
        """The first entries of a large file (None for a small one: load it whole)."""
        head = await self.core.entries_head(scope, self.head_bytes)
        if head is None:
            return None
        entries, expected = head
        return EntriesSnapshot(scope, entries, False, expected)
