"""The search index while it is usable, and what to do when it is not.

Files are the source of truth, so a broken index costs speed, never memories: every
index call of the memory service goes through this guard, which turns a database error
into degraded mode (search reads the files) instead of a failed read or write.

Only damage degrades: a database that another process keeps locked is waited for by the
database layer (`storage/db.py`) and, if it stays locked, is one failed call, not a reason to
stop using the index. And degraded mode is not for the process's lifetime: the index is
put aside, and `retry_seconds` later the next search tries it again (a `chatmem reindex`
run from another process, or a disk that has room again, brings it back without a
restart).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from memory_core.base.clock import Monotonic
from memory_core.base.errors import DatabaseBusy, StorageError
from memory_core.base.retry import CoolDown
from memory_core.base.scope import ScopeKey
from memory_core.longterm.store import WriteRecord
from memory_core.recall.index.model import IndexBackend

log = logging.getLogger(__name__)

RETRY_SECONDS = 60.0
"""How long a degraded index rests before a search tries it again."""


class IndexGuard:
    def __init__(
        self,
        index: IndexBackend | None = None,
        reason: str | None = None,
        *,
        retry_seconds: float = RETRY_SECONDS,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self._index = index
        self.reason = reason
        self.degradations = 0
        """How many times this process turned the index off (a figure for tests and
        operators: a healthy workspace shared by several processes keeps it at 0)."""
        self._resting: IndexBackend | None = None
        self._rest = CoolDown(retry_seconds, monotonic)

    @property
    def retry_seconds(self) -> float:
        """How long a failed index rests before a search tries it again."""
        return self._rest.seconds

    @retry_seconds.setter
    def retry_seconds(self, seconds: float) -> None:
        self._rest.seconds = seconds

    @property
    def index(self) -> IndexBackend | None:
        """The index to use now; None while degraded (or without a database)."""
        return self._index

    @index.setter
    def index(self, index: IndexBackend | None) -> None:
        # Set by the owner of the database (opened, closed, rebuilt): whatever rested
        # here belongs to a connection that is gone.
        self._index = index
        self._resting = None

    def failed(self, exc: BaseException) -> None:
        """Keep answering from files; the index is tried again `retry_seconds` from now
        (`revive`), and `chatmem reindex` repairs it for good."""
        if isinstance(exc, DatabaseBusy):
            # Another process's lock outlasted every retry: this call failed, the index
            # did not.
            log.warning("search index busy, not degrading: %s", exc)
            return
        if self._index is not None:
            self._resting = self._index
            self.degradations += 1
        self._index = None
        self._rest.start()
        self.reason = f"index unusable: {exc}"
        log.warning("search index unusable, searching files directly: %s", exc)

    async def revive(self, scope: ScopeKey) -> IndexBackend | None:
        """The index to search `scope` with: the usable one, or, once the resting one's
        time is up, that one if syncing the scope works again (the probe is the query
        the search needs first anyway); None to search the files."""
        if self._index is not None:
            return self._index
        resting = self._resting
        if resting is None or self._rest.resting():
            return None
        self._rest.start()  # one probe at a time
        try:
            await resting.sync_scope(scope)
        except StorageError as exc:
            if not isinstance(exc, DatabaseBusy):
                self.reason = f"index unusable: {exc}"
                log.warning("search index still unusable: %s", exc)
            return None
        if self._resting is resting and self._index is None:
            self._index, self._resting, self.reason = resting, None, None
            log.warning("search index usable again")
        return self._index

    async def _use(self, work: Callable[[IndexBackend], Awaitable[object]]) -> None:
        """`work` on the usable index (nothing while degraded); a database error turns it
        off through `failed`, never to the caller: the file written is the truth."""
        index = self._index
        if index is None:
            return
        try:
            await work(index)
        except StorageError as exc:
            self.failed(exc)

    async def file_written(self, scope: ScopeKey, path: str) -> None:
        """The core wrote `path` of `scope`: index it again. Busy or broken, the file row
        keeps its old stamp, so the next sync reads it."""
        await self._use(lambda index: index.sync_file(scope, path))

    async def long_term_written(self, scope: ScopeKey, path: str, record: WriteRecord) -> None:
        """Index what a long-term write changed: only added, edited and removed entries
        are (re)tokenized, not the whole file."""
        await self._use(lambda index: index.update_long_term(scope, path, record))

    async def sync_all(self, progress: Callable[[int, int], None] | None = None) -> None:
        await self._use(lambda index: index.sync_all(progress))

    async def sync_opened(self, progress: Callable[[int, int], None] | None = None) -> None:
        """An open's sync: work independent of the number of scopes (`SearchIndex`)."""
        await self._use(lambda index: index.sync_opened(progress))

    async def remove_messages(self, scope: ScopeKey, message_ids: Sequence[int]) -> None:
        """Message chunks of history the archive moved to files or the caps trimmed. If
        busy, the chunks stay until a rebuild, findable twice (they are also in the archive
        file); failing the archive run over that would help nobody."""
        if message_ids:
            await self._use(lambda index: index.remove_messages(scope, message_ids))
