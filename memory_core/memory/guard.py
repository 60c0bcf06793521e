"""The search index while it is usable, and what to do when it is not.

Files are the source of truth, so a broken index costs speed, never memories: every
index call of the memory service goes through this guard, which turns a database error
into degraded mode (search reads the files) instead of a failed read or write.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from memory_core.scope import ScopeKey
from memory_core.storage import IndexBackend
from memory_core.store import WriteRecord

log = logging.getLogger(__name__)


class IndexGuard:
    def __init__(self, index: IndexBackend | None = None, reason: str | None = None) -> None:
        self.index = index
        self.reason = reason

    def failed(self, exc: BaseException) -> None:
        """Keep answering from files; `chatmem reindex` repairs the index."""
        self.reason = f"index unusable: {exc}"
        log.warning("search index unusable, searching files directly: %s", exc)
        self.index = None

    async def file_written(self, scope: ScopeKey, path: str) -> None:
        """The core wrote `path` of `scope`: index it again."""
        if self.index is None:
            return
        try:
            await self.index.sync_file(scope, path)
        except sqlite3.DatabaseError as exc:
            self.failed(exc)

    async def long_term_written(self, scope: ScopeKey, path: str, record: WriteRecord) -> None:
        """Index what a long-term write changed: only added, edited and removed entries
        are (re)tokenized, not the whole file."""
        if self.index is None:
            return
        try:
            await self.index.update_long_term(scope, path, record)
        except sqlite3.DatabaseError as exc:
            self.failed(exc)

    async def sync_all(self) -> None:
        if self.index is None:
            return
        try:
            await self.index.sync_all()
        except sqlite3.DatabaseError as exc:
            self.failed(exc)

    async def remove_messages(self, scope: ScopeKey, message_ids: Sequence[int]) -> None:
        """Message chunks of history the archive moved to files or the caps trimmed."""
        if self.index is None or not message_ids:
            return
        try:
            await self.index.remove_messages(scope, message_ids)
        except sqlite3.DatabaseError as exc:
            self.failed(exc)
