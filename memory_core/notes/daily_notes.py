"""Daily notes: appended to `memory/YYYY-MM-DD.md`, indexed as they are written."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, date, datetime, tzinfo
from functools import partial
from pathlib import Path
from typing import Protocol

from memory_core.base.atomic import write_error
from memory_core.base.chunks import Appended, Chunk, ChunkKind
from memory_core.base.errors import ChatmemError, StorageError
from memory_core.base.inputs import storable
from memory_core.base.locks import LockRegistry, try_lock_file, unlock_file
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.notes import daily

log = logging.getLogger(__name__)

Prepare = Callable[[Chunk, ChunkKind, tzinfo], tuple[Chunk, str]]
"""How the index tokenizes a chunk (`recall.index.files.prepare_chunk`): done here, in the
append's own worker call, so the note and its terms cost one hop off the loop."""


class NotesIndex(Protocol):
    """What of the search index a note's append writes to (the index is built over the
    notes, so the notes know it only by this)."""

    async def add_appended(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        append: Callable[[], Appended | None],
    ) -> Appended | None: ...

    async def add_prepared(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        prepared: Sequence[tuple[Chunk, str]],
        *,
        stamp: tuple[int, int] | None,
        previous: tuple[int, int] | None = None,
    ) -> None: ...


class GuardedIndex(Protocol):
    """The index while it is usable (`IndexGuard`): None while degraded, and told of a
    failure so that search reads the files."""

    @property
    def index(self) -> NotesIndex | None: ...

    def failed(self, exc: BaseException) -> None: ...


class DailyNotes:
    def __init__(
        self,
        workspace: Workspace,
        locks: LockRegistry,
        guard: GuardedIndex,
        prepare: Prepare,
        zone: tzinfo,
        now: Callable[[], datetime],
        max_chars: int,
    ) -> None:
        self.workspace = workspace
        self.locks = locks
        self.guard = guard
        self.prepare = prepare
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
        note stays in the file and the next sync indexes it; if the database fails before
        the note was written, the slow path writes it (the file is the memory, the index
        only finds it). What the disk refuses is one MemoryFileError line, and the file is
        left as it was: no caller is told a torn note was saved.
        """
        if not storable(text, "the note").strip():
            raise ChatmemError("a note needs some text")
        when = (now or self.now()).astimezone(self.zone)
        path = self.workspace.daily_path(scope, when.date())
        relative = self.workspace.relative(path)
        try:
            done = await self._append_now(scope, path, relative, text, when)
            if done is not None:
                return done
            return await self._append_waiting(scope, path, relative, text, when)
        except OSError as exc:  # taking the lock (its directory): the note was not written
            where = exc.filename if isinstance(exc.filename, str) else path
            raise write_error("note not saved", where, exc) from exc

    async def _append_now(
        self, scope: ScopeKey, path: Path, relative: str, text: str, when: datetime
    ) -> tuple[str, int] | None:
        """`append`'s one round trip; None when it did not write the note (no index, the
        file lock held by another process, the database failing before the write, locks
        that are not lock files)."""
        index = self.guard.index
        if index is None or not self.locks.fast_path:
            return None  # the lock is not a lock file: take it through `hold_running`
        written: list[tuple[daily.AppendedNote, Future[None]]] = []
        async with self.locks.hold_local(self.workspace.lock_name(scope, "daily")) as lock_path:

            def append() -> Appended | None:
                held = try_lock_file(lock_path)
                if held is None:
                    return None
                try:
                    note, prepared = _append_blocking(
                        self.workspace, scope, path, text, when, self.prepare
                    )
                finally:
                    unlock_file(held)
                # The fsync runs while the index write does; both end before we return.
                written.append((note, daily.fsync_soon(path, self.workspace.root)))
                assert prepared is not None  # indexed=True
                return Appended([prepared], note.after, note.before)

            try:
                await index.add_appended(scope, relative, ChunkKind.DAILY, append)
            except StorageError as exc:
                # Before the write (a full or read-only database, a lock held too long) or
                # after it: either way the note must not depend on the index.
                self.guard.failed(exc)
            except OSError as exc:
                if not written:  # the lock file: the note was not written
                    raise write_error("note not saved", lock_path, exc) from exc
                _not_indexed(relative, exc)
            finally:
                if written:
                    await asyncio.shield(asyncio.wrap_future(written[0][1]))
        return (relative, written[0][0].line_from) if written else None

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
                self.prepare if self.guard.index is not None else None,
            ),
        ) as (note, prepared):
            syncing = asyncio.ensure_future(
                asyncio.to_thread(daily.fsync_path, path, self.workspace.root)
            )
            try:
                index = self.guard.index
                if index is not None and prepared is not None:
                    try:
                        await index.add_prepared(
                            scope,
                            relative,
                            ChunkKind.DAILY,
                            [prepared],
                            stamp=note.after,
                            previous=note.before,
                        )
                    except StorageError as exc:
                        self.guard.failed(exc)
                    except OSError as exc:
                        _not_indexed(relative, exc)
            finally:
                await asyncio.shield(syncing)
        return relative, note.line_from

    async def recent(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """Today's and yesterday's notes under the configured character cap."""
        notes = await asyncio.to_thread(
            daily.read_recent_blocking,
            self.workspace.root,
            self.workspace.memory_dir(scope),
            self.today(now),
            self.max_chars,
        )
        return daily.render_recent(notes)


def _not_indexed(relative: str, exc: OSError) -> None:
    """The note is in its file, but reading the file again for the index failed: the
    note is saved all the same, and the file row's old stamp makes the next sync retry."""
    log.warning("note saved in %s but not indexed yet: %s", relative, exc)


def _append_blocking(
    workspace: Workspace,
    scope: ScopeKey,
    path: Path,
    text: str,
    when: datetime,
    prepare: Prepare | None,
) -> tuple[daily.AppendedNote, tuple[Chunk, str] | None]:
    """`append`'s blocking work in one call: the scope's directory, the append (its fsync
    runs beside the index write), and the note's chunk and terms when an index will take
    them (its days resolved in `when`'s zone, the workspace's)."""
    try:
        workspace.ensure_scope(scope)
    except OSError as exc:
        raise write_error("note not saved", path.parent, exc) from exc
    note = daily.append_note_blocking(path, text, when, root=workspace.root, durable=False)
    if prepare is None:  # no index will take them
        return note, None
    chunk = Chunk(note.line_from, note.line_to, note.text, when)
    return note, prepare(chunk, ChunkKind.DAILY, when.tzinfo or UTC)
