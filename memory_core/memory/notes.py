"""Daily notes: appended to `memory/YYYY-MM-DD.md`, indexed as they are written."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from datetime import date, datetime, tzinfo
from functools import partial
from pathlib import Path

from memory_core import daily
from memory_core.chunking import Chunk, ChunkKind
from memory_core.errors import ChatmemError
from memory_core.index import Appended
from memory_core.locks import LockRegistry, try_lock_file, unlock_file
from memory_core.memory.guard import IndexGuard
from memory_core.scope import ScopeKey
from memory_core.text import tokenize
from memory_core.workspace import Workspace


class DailyNotes:
    def __init__(
        self,
        workspace: Workspace,
        locks: LockRegistry,
        guard: IndexGuard,
        zone: tzinfo,
        now: Callable[[], datetime],
        max_chars: int,
    ) -> None:
        self.workspace = workspace
        self.locks = locks
        self.guard = guard
        self.zone = zone
        self.now = now
        self.max_chars = max_chars

    def today(self, when: datetime | None = None) -> date:
        return (when or self.now()).astimezone(self.zone).date()

    async def append(
        self, scope: ScopeKey, text: str, *, now: datetime | None = None
    ) -> tuple[str, int]:
        """Append a note to the scope's file for today; returns (path, first line).

        With an index, one round trip: on the database thread, take the file lock without
        waiting, append and tokenize the note, then index it in one transaction while a
        worker thread fsyncs the file; the call returns once both are done.
        If another process holds the file lock, the slow path waits for it in a worker
        thread instead. The file is always written first: if the index write fails, the
        note stays in the file and the next sync indexes it.
        """
        if not text.strip():
            raise ChatmemError("a note needs some text")
        when = (now or self.now()).astimezone(self.zone)
        path = self.workspace.daily_path(scope, when.date())
        relative = self.workspace.relative(path)
        name = self.workspace.lock_name(scope, "daily")
        index = self.guard.index
        if index is not None:
            written: list[tuple[daily.AppendedNote, Future[None]]] = []
            async with self.locks.hold_local(name) as lock_path:

                def append() -> Appended | None:
                    held = try_lock_file(lock_path)
                    if held is None:
                        return None
                    try:
                        note, tokens = _append_blocking(
                            self.workspace, scope, path, text, when, indexed=True
                        )
                    finally:
                        unlock_file(held)
                    # The fsync runs while the index write does; both end before we return.
                    written.append((note, daily.fsync_soon(path)))
                    chunk = Chunk(note.line_from, note.line_to, note.text, when)
                    return Appended([(chunk, tokens or "")], note.after, note.before)

                try:
                    await index.add_appended(scope, relative, ChunkKind.DAILY, append)
                except sqlite3.DatabaseError as exc:
                    if not written:
                        raise
                    self.guard.failed(exc)
                finally:
                    if written:
                        await asyncio.shield(asyncio.wrap_future(written[0][1]))
                if written:
                    return relative, written[0][0].line_from
        return await self._append_waiting(scope, path, relative, text, when)

    async def _append_waiting(
        self, scope: ScopeKey, path: Path, relative: str, text: str, when: datetime
    ) -> tuple[str, int]:
        """`append` when the file lock must be waited for (or there is no index): the
        append in a worker thread under the lock, then the index write beside the fsync."""
        async with self.locks.hold_running(
            self.workspace.lock_name(scope, "daily"),
            partial(
                _append_blocking,
                self.workspace,
                scope,
                path,
                text,
                when,
                indexed=self.guard.index is not None,
            ),
        ) as (note, tokens):
            syncing = asyncio.ensure_future(asyncio.to_thread(daily.fsync_path, path))
            try:
                index = self.guard.index
                if index is not None and tokens is not None:
                    chunk = Chunk(note.line_from, note.line_to, note.text, when)
                    try:
                        await index.add_prepared(
                            scope,
                            relative,
                            ChunkKind.DAILY,
                            [(chunk, tokens)],
                            stamp=note.after,
                            previous=note.before,
                        )
                    except sqlite3.DatabaseError as exc:
                        self.guard.failed(exc)
            finally:
                await asyncio.shield(syncing)
        return relative, note.line_from

    async def recent(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """Today's and yesterday's notes under the configured character cap."""
        notes = await asyncio.to_thread(
            daily.read_recent_blocking,
            self.workspace.memory_dir(scope),
            self.today(now),
            self.max_chars,
        )
        return daily.render_recent(notes)


def _append_blocking(
    workspace: Workspace,
    scope: ScopeKey,
    path: Path,
    text: str,
    when: datetime,
    *,
    indexed: bool,
) -> tuple[daily.AppendedNote, str | None]:
    """`append`'s blocking work in one call: the scope's directory, the append (its fsync
    runs beside the index write), and the note's terms when an index will take them."""
    workspace.ensure_scope(scope)
    note = daily.append_note_blocking(path, text, when, durable=False)
    return note, " ".join(tokenize(note.text)) if indexed else None
