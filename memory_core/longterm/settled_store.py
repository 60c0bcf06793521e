"""The long-term files as every reader and writer but the staging sees them (`SettledStore`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.store import LongTermStore

T = TypeVar("T")

Settle = Callable[[ScopeKey], Awaitable[None]]


class SettledStore:
    """The long-term files as every reader and writer but the staging sees them: the
    scope's staged captures (`staging.py`) are written first, so reads see them and
    writes stay in order. Without a journal (`settle` None) it reads and writes the files
    as they are. Built after the staging, over the same `LongTermStore` the staging
    writes through, so neither has to be told of the other afterwards."""

    def __init__(self, files: LongTermStore, settle: Settle | None) -> None:
        self.files = files
        self.locks = files.locks
        self.last_write = files.last_write
        self._settle = settle

    def path(self, scope: ScopeKey) -> Path:
        return self.files.path(scope)

    async def _settled(self, scope: ScopeKey) -> None:
        """The scope's staged captures written, when there is a journal to hold them."""
        if self._settle is not None:
            await self._settle(scope)

    async def current(self, scope: ScopeKey) -> tuple[bytes | None, ParsedMemory | None]:
        """`LongTermStore.current` once the scope's staged captures are written."""
        await self._settled(scope)
        return await self.files.current(scope)

    async def load(self, scope: ScopeKey, *, max_age: float = 0.0) -> ParsedMemory:
        """`LongTermStore.load` once the scope's staged captures are written."""
        await self._settled(scope)
        return await self.files.load(scope, max_age=max_age)

    async def update(
        self,
        scope: ScopeKey,
        change: Callable[[ParsedMemory], tuple[list[MemoryEntry], T]],
        now: datetime,
        *,
        quarantine: Sequence[QuarantinedBlock] = (),
    ) -> T:
        """`LongTermStore.update` once the scope's staged captures are written."""
        await self._settled(scope)
        return await self.files.update(scope, change, now, quarantine=quarantine)
