"""What a write of a large long-term file keeps for the next reader, done after the file is
written: its parse (`parse_delta`: by difference) and its entities (`EntityKeeper`).

Neither changes what the write put on disk, so the store returns as soon as the file is
written and this runs in a worker thread beside what follows the write (the search
index's update, whose SQLite statements run without the GIL). The store waits for it
before anything else touches the scope: the next read, write or close sees the same state
as when it was done inside the write. On a 100 000-entry file it is ~0.4 s of a close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from memory_core.base.entries import MemoryEntry
from memory_core.base.process_knobs import gc_paused
from memory_core.base.scope import ScopeKey
from memory_core.longterm import parse_delta
from memory_core.longterm.entity_keeper import EntityKeeper
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.parse_cache import Base, CacheFiles, Mark

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Keeping:
    """One written version's parse and entities, to keep beside the file."""

    files: CacheFiles
    old_base: Base | None
    parsed: ParsedMemory
    mark: Mark
    archive_below: float
    before_entries: Sequence[MemoryEntry] | None
    """The version the write replaced (its entries and hash), whose entities the new
    version's are found from by difference; None for a write with nothing before it."""
    before_digest: bytes | None
    made: parse_delta.Made | None = None
    """How the write made the version from the one it replaced, when it copied its blocks."""

    def __call__(self, scope: str, entities: EntityKeeper) -> parse_delta.Kept | None:
        """Blocking: the base the parse cache now stands on, and the version's pieces
        against it (None: nothing was kept)."""
        with gc_paused():
            base = parse_delta.save(
                self.files, self.old_base, self.parsed, self.mark, self.archive_below, self.made
            )
            if base is not None and self.before_entries is not None:
                entities.written(
                    scope,
                    self.files,
                    self.before_entries,
                    self.before_digest,
                    self.parsed.entries,
                    self.mark.digest,
                )
        return base


class PendingKeeps:
    """Per scope, the keeping still running after its write."""

    def __init__(self) -> None:
        self._tasks: dict[ScopeKey, asyncio.Task[None]] = {}

    def start(self, scope: ScopeKey, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` in the background; the scope's previous keeping has been awaited."""
        self._tasks[scope] = asyncio.ensure_future(_logged(scope, work))

    async def done(self, scope: ScopeKey) -> None:
        """The scope's keeping finished (at once when none runs)."""
        task = self._tasks.get(scope)
        if task is not None:
            await asyncio.shield(task)
            if self._tasks.get(scope) is task:
                del self._tasks[scope]

    async def all_done(self) -> None:
        """Every scope's keeping finished: what a close waits for."""
        for scope in list(self._tasks):
            await self.done(scope)


async def _logged(scope: ScopeKey, work: Callable[[], Awaitable[None]]) -> None:
    """A keeping that fails costs the next process a parse, never the write: logged."""
    try:
        await work()
    except Exception as exc:  # the file is written; only the cache beside it is missing
        log.warning("parse cache of %s not kept (%s); the next read parses the file", scope, exc)
