"""What follows every write of a scope's long-term file, whoever made it.

A write by `LongTermMemory` (an edit, a merge) and the staging's background write of
journalled captures are followed by the same three steps: the entries the write dropped
are kept as forgotten, its changes are audited, and the index is told. One object does
them for both writers, so the staging needs nothing of `LongTermMemory` (built after it)
and neither writer repeats the other's rules.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Protocol

from memory_core.base.errors import StorageError
from memory_core.base.merge_values import Change
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.longterm.forgotten_keeper import ForgottenKeeper
from memory_core.longterm.long_term_changes import kept_forgotten
from memory_core.longterm.staging import Applied
from memory_core.longterm.store import LongTermStore, WriteRecord
from memory_core.storage.interfaces import AuditBackend

log = logging.getLogger(__name__)


class WriteListener(Protocol):
    """Told of each write (the search index's guard: the index is built over long-term
    memory, so long-term memory knows it only by this)."""

    async def long_term_written(self, scope: ScopeKey, path: str, record: WriteRecord) -> None: ...


class AfterWrites:
    def __init__(
        self,
        files: LongTermStore,
        kept: ForgottenKeeper,
        guard: WriteListener,
        workspace: Workspace,
        audit: AuditBackend | None,
    ) -> None:
        self.files = files
        self.kept = kept
        self.guard = guard
        self.workspace = workspace
        self.audit = audit

    async def staged(
        self, scope: ScopeKey, applied: list[Applied], decayed: list[Change], when: datetime
    ) -> None:
        """After the background write of staged captures: forgotten entries kept, audit
        rows and index. The index is told at once, beside the rest: its comparison of
        the two versions runs in a thread while the forgotten entries and audit rows are
        written (a large file's index update is the longest of the three)."""
        # Read before any await: the next write of the scope replaces the record.
        written = self.files.last_write.get(scope)

        async def kept_and_recorded() -> None:
            if written is not None:
                await self.kept.keep(scope, kept_forgotten(written.before.entries, decayed, when))
            for capture in applied:
                await self.record(scope, capture.changes, capture.source, capture.when)
            await self.record(scope, decayed, applied[-1].source if applied else "capture", when)

        outcomes = await asyncio.gather(
            self._indexed(scope, written), kept_and_recorded(), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def record(
        self, scope: ScopeKey, changes: list[Change], source: str, when: datetime
    ) -> None:
        """Audit the changes; a failed audit write is logged, the file stays written."""
        if self.audit is None:
            return
        try:
            await self.audit.record(scope, changes, source, when)
        except StorageError as exc:
            log.warning("audit log write failed (%s); the memory file was written", exc)

    async def indexed(self, scope: ScopeKey) -> None:
        """Tell the index what the scope's last write replaced and produced."""
        await self._indexed(scope, self.files.last_write.get(scope))

    async def _indexed(self, scope: ScopeKey, record: WriteRecord | None) -> None:
        if record is not None:
            relative = self.workspace.relative(self.files.path(scope))
            await self.guard.long_term_written(scope, relative, record)
