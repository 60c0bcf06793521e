"""The scope's forgotten file as the long-term memory uses it: off the loop, one lock a step.

`forgotten.py` reads and writes the file (blocking); this keeper runs each of its steps in
a worker thread under the scope's `forgotten` lock. The lock is taken for one
read-change-write and never held across a write of the long-term file: that write may
first wait for a staged write, whose follow-up keeps what it forgot under this very lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from datetime import datetime

from memory_core.base.entries import MemoryEntry
from memory_core.base.locks import LockRegistry
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.longterm.forgotten import ForgottenFile


class ForgottenKeeper:
    """Keeps, lists and takes back the entries a scope's writes forgot."""

    def __init__(
        self,
        file: ForgottenFile,
        workspace: Workspace,
        locks: LockRegistry,
        now: Callable[[], datetime],
    ) -> None:
        self.file = file
        self.workspace = workspace
        # The store's registry: its process layer may be the database's advisory locks.
        self._locks = locks
        self.now = now

    @asynccontextmanager
    async def _lock(self, scope: ScopeKey) -> AsyncIterator[None]:
        async with self._locks.hold(self.workspace.lock_name(scope, "forgotten")):
            yield

    async def keep(self, scope: ScopeKey, entries: list[MemoryEntry]) -> None:
        """Keep entries a write just dropped, and drop kept ones past their days. Nothing
        to do (no lock, no write) when nothing was forgotten and no file is kept."""
        if not entries and not await asyncio.to_thread(self.file.path(scope).exists):
            return
        async with self._lock(scope):
            await asyncio.to_thread(self.file.keep, scope, entries, self.now())

    async def drop(self, scope: ScopeKey, entry_id: str) -> None:
        """Drop a live entry's copy from the forgotten file: what a crash between the two
        writes of a restore leaves (a stat when there is no file)."""
        if not await asyncio.to_thread(self.file.path(scope).exists):
            return
        async with self._lock(scope):
            await asyncio.to_thread(self.file.take, scope, {entry_id}, self.now())

    async def live(self, scope: ScopeKey, when: datetime) -> list[MemoryEntry]:
        """The kept entries not yet past their days as of `when`, newest first."""
        return await asyncio.to_thread(self.file.live, scope, when)

    async def take(self, scope: ScopeKey, ids: Collection[str]) -> list[MemoryEntry]:
        """Remove the kept entries with these ids from the file; the ones it held."""
        async with self._lock(scope):
            return await asyncio.to_thread(self.file.take, scope, set(ids), self.now())
