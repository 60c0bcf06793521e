"""`MemoryCore`: the async facade every front end (bots, TUI, CLI) uses.

It owns the workspace, the locks, the long-term store and the database connection, and
takes an explicit `ScopeKey` on every call: nothing here derives a scope from anything.
"""

from __future__ import annotations

import asyncio
import logging
import zoneinfo
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import aiosqlite

from memory_core import daily
from memory_core.audit import AuditLog
from memory_core.clock import Clock, ensure_aware, system_clock
from memory_core.config import Config
from memory_core.db import open_database
from memory_core.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.errors import ChatmemError, EntryNotFound, IndexUnavailable
from memory_core.locks import LockRegistry
from memory_core.memory_md import ParsedMemory, QuarantinedBlock
from memory_core.merge import Candidate, Change, ChangeKind, MergeResult, merge
from memory_core.prompt import render_prompt_memories, select_prompt_entries
from memory_core.scope import MAIN, ScopeKey
from memory_core.scoring import ScoringPolicy, Status, initial_score, score_at, status_of
from memory_core.store import LongTermStore
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)

FileListener = Callable[[ScopeKey, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ScopeStatus:
    scope: ScopeKey
    active: list[MemoryEntry]
    archived: list[MemoryEntry]
    quarantined: list[QuarantinedBlock]
    daily_files: int
    path: str


@dataclass(frozen=True, slots=True)
class ValidationProblem:
    scope: ScopeKey
    path: str
    block: QuarantinedBlock


@dataclass(slots=True)
class _Listeners:
    on_file_written: list[FileListener] = field(default_factory=list)


class MemoryCore:
    """Open with `async with MemoryCore.open(config) as core:`."""

    def __init__(self, config: Config, *, clock: Clock = system_clock) -> None:
        self.config = config
        self.workspace = Workspace.at(config.workspace_path)
        self.policy: ScoringPolicy = config.scoring.policy()
        self.tz = zoneinfo.ZoneInfo(config.timezone)
        self._clock = clock
        self.locks = LockRegistry(self.workspace.locks_dir)
        self.store = LongTermStore(self.workspace, self.locks, self.policy.archive_below)
        self._db: aiosqlite.Connection | None = None
        self._audit: AuditLog | None = None
        self._listeners = _Listeners()
        self.degraded_reason: str | None = None

    # --- lifecycle ------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls, config: Config, *, clock: Clock = system_clock
    ) -> AsyncIterator[MemoryCore]:
        core = cls(config, clock=clock)
        await core.start()
        try:
            yield core
        finally:
            await core.close()

    async def start(self) -> None:
        await asyncio.to_thread(self.workspace.ensure_scope, MAIN)
        try:
            self._db = await open_database(self.workspace.db_path)
        except IndexUnavailable as exc:
            self.degraded_reason = str(exc)
            log.warning("database unavailable, running without audit log and index: %s", exc)
            return
        self._audit = AuditLog(self._db)

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None
            self._audit = None

    @property
    def db(self) -> aiosqlite.Connection | None:
        return self._db

    @property
    def audit(self) -> AuditLog:
        if self._audit is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        return self._audit

    def now(self) -> datetime:
        """Clock time at second precision: what files can store is what we compute with."""
        return ensure_aware(self._clock()).replace(microsecond=0)

    def today(self, when: datetime | None = None) -> date:
        return (when or self.now()).astimezone(self.tz).date()

    def add_file_listener(self, listener: FileListener) -> None:
        """Called after the core writes a memory file (the index re-reads it)."""
        self._listeners.on_file_written.append(listener)

    async def _file_written(self, scope: ScopeKey, path: str) -> None:
        for listener in self._listeners.on_file_written:
            await listener(scope, path)

    # --- long-term memory ------------------------------------------------------------
    async def load(self, scope: ScopeKey) -> ParsedMemory:
        return await self.store.load(scope)

    async def entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        return list((await self.store.load(scope)).entries)

    async def get_entry(self, scope: ScopeKey, entry_id: str) -> MemoryEntry:
        for entry in await self.entries(scope):
            if entry.id == entry_id:
                return entry
        raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

    async def merge_candidates(
        self,
        scope: ScopeKey,
        candidates: Iterable[Candidate],
        *,
        session_id: str | None,
        source: str,
        now: datetime | None = None,
    ) -> MergeResult:
        """Decay, then add or reinforce candidates; audit and record the session."""
        when = now or self.now()
        batch = list(candidates)
        seen = (
            await self.audit.seen_sessions(scope)
            if session_id is not None and self._audit is not None
            else frozenset()
        )

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], MergeResult]:
            result = merge(parsed.entries, batch, when, session_id, self.policy, seen)
            return result.entries, result

        result = await self.store.update(scope, change, when)
        if not result.skipped:
            await self._record(scope, result.changes, source, when)
            if session_id is not None and self._audit is not None:
                await self._audit.mark_session(scope, session_id, when, result.stats)
            await self._file_written(scope, self.workspace.relative(self.store.path(scope)))
        return result

    async def capture(
        self,
        scope: ScopeKey,
        content: str,
        *,
        category: str = "fact",
        importance: Importance | str = Importance.MEDIUM,
        source: str = "capture",
        expires_at: datetime | None = None,
    ) -> tuple[MemoryEntry, MergeResult]:
        """Save one memory now (a repeat of an existing one reinforces it)."""
        text = content.strip()
        if not text:
            raise ChatmemError("a memory needs some content")
        cand = Candidate(
            content=text,
            category=category,
            importance=Importance(importance),
            expires_at=expires_at,
        )
        result = await self.merge_candidates(scope, [cand], session_id=None, source=source)
        touched = [c for c in result.changes if c.kind in (ChangeKind.ADDED, ChangeKind.REINFORCED)]
        if not touched:
            raise ChatmemError("the memory was not stored (already expired?)")
        entry = next(e for e in result.entries if e.id == touched[-1].entry_id)
        return entry, result

    async def consolidate(self, scope: ScopeKey, *, now: datetime | None = None) -> MergeResult:
        """Decay, expire, archive and forget as of `now` (no new memories)."""
        return await self.merge_candidates(
            scope, (), session_id=None, source="consolidate", now=now
        )

    async def forget(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Delete an entry from the file; the audit log keeps its last text."""
        return await self._edit_one(
            scope,
            entry_id,
            source,
            lambda e, now: (None, ChangeKind.FORGOTTEN, "forgotten by request"),
        )

    async def set_pinned(
        self, scope: ScopeKey, entry_id: str, pinned: bool, *, source: str = "user"
    ) -> MemoryEntry:
        kind = ChangeKind.PINNED if pinned else ChangeKind.UNPINNED
        return await self._edit_one(
            scope,
            entry_id,
            source,
            lambda e, now: (e.with_(pinned=pinned, scored_at=now), kind, ""),
        )

    async def archive(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            current = score_at(e, now, self.policy)
            return (
                e.with_(archived=ArchiveReason.MANUAL, score=current, scored_at=now),
                ChangeKind.ARCHIVED,
                "archived by request",
            )

        return await self._edit_one(scope, entry_id, source, change)

    async def restore(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Back to Active; a decayed entry is lifted to the low-importance start score and
        counted as activated now, or it would fall straight back into the archive."""

        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            current = score_at(e, now, self.policy)
            floor = initial_score(Importance.LOW)
            if current < self.policy.archive_below:
                restored = e.with_(archived=None, score=floor, scored_at=now, last_activated=now)
            else:
                restored = e.with_(archived=None, score=current, scored_at=now)
            return restored, ChangeKind.RESTORED, "restored by request"

        return await self._edit_one(scope, entry_id, source, change)

    async def edit(
        self, scope: ScopeKey, entry_id: str, content: str, *, source: str = "user"
    ) -> MemoryEntry:
        text = content.strip()
        if not text:
            raise ChatmemError("a memory needs some content")
        return await self._edit_one(
            scope, entry_id, source, lambda e, now: (e.with_(content=text), ChangeKind.EDITED, "")
        )

    async def reinforce_entries(
        self, scope: ScopeKey, entry_ids: Iterable[str], *, source: str = "recall"
    ) -> MergeResult:
        """Count entries as activated (used in a reply): the same rule as a re-mention."""
        ids = set(entry_ids)
        when = self.now()

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], MergeResult]:
            by_id = {e.id: e for e in parsed.entries}
            cands = [
                Candidate(content=by_id[i].content, category=by_id[i].category, matches=i)
                for i in ids
                if i in by_id
            ]
            result = merge(parsed.entries, cands, when, None, self.policy)
            return result.entries, result

        result = await self.store.update(scope, change, when)
        await self._record(scope, result.changes, source, when)
        await self._file_written(scope, self.workspace.relative(self.store.path(scope)))
        return result

    EditFn = Callable[[MemoryEntry, datetime], tuple[MemoryEntry | None, ChangeKind, str]]

    async def _edit_one(
        self, scope: ScopeKey, entry_id: str, source: str, fn: EditFn
    ) -> MemoryEntry:
        when = self.now()

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], tuple[MemoryEntry, Change]]:
            for index, entry in enumerate(parsed.entries):
                if entry.id == entry_id:
                    updated, kind, detail = fn(entry, when)
                    entries = list(parsed.entries)
                    if updated is None:
                        del entries[index]
                    else:
                        entries[index] = updated
                    after = updated or entry
                    record = Change(
                        kind,
                        entry.id,
                        score_at(entry, when, self.policy),
                        None if updated is None else after.score,
                        after.content,
                        after.category,
                        detail,
                    )
                    return entries, (after, record)
            raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

        entry, record = await self.store.update(scope, change, when)
        await self._record(scope, [record], source, when)
        await self._file_written(scope, self.workspace.relative(self.store.path(scope)))
        return entry

    async def _record(
        self, scope: ScopeKey, changes: list[Change], source: str, when: datetime
    ) -> None:
        if self._audit is None:
            return
        try:
            await self._audit.record(scope, changes, source, when)
        except aiosqlite.Error as exc:
            log.warning("audit log write failed (%s); the memory file was written", exc)

    # --- prompt ----------------------------------------------------------------------
    async def prompt_memories(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        when = now or self.now()
        settings = self.config.prompt
        chosen = select_prompt_entries(
            await self.entries(scope),
            when,
            min_score=settings.min_score,
            top_k=settings.top_k,
            policy=self.policy,
        )
        return render_prompt_memories(chosen, settings.max_tokens)

    # --- daily notes -----------------------------------------------------------------
    async def append_daily(
        self, scope: ScopeKey, text: str, *, now: datetime | None = None
    ) -> tuple[str, int]:
        """Append a note to the scope's file for today; returns (path, first line)."""
        if not text.strip():
            raise ChatmemError("a note needs some text")
        when = (now or self.now()).astimezone(self.tz)
        path = self.workspace.daily_path(scope, when.date())
        async with self.locks.hold(self.workspace.lock_name(scope, "daily")):
            await asyncio.to_thread(self.workspace.ensure_scope, scope)
            line = await asyncio.to_thread(daily.append_note_blocking, path, text, when)
        relative = self.workspace.relative(path)
        await self._file_written(scope, relative)
        return relative, line

    async def recent_daily(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """Today's and yesterday's notes under the configured character cap."""
        notes = await asyncio.to_thread(
            daily.read_recent_blocking,
            self.workspace.memory_dir(scope),
            self.today(now),
            self.config.prompt.daily_max_chars,
        )
        return daily.render_recent(notes)

    # --- reports ---------------------------------------------------------------------
    async def scopes(self) -> list[ScopeKey]:
        return await asyncio.to_thread(self.workspace.scopes)

    async def status(self, scope: ScopeKey, *, now: datetime | None = None) -> ScopeStatus:
        when = now or self.now()
        parsed = await self.store.load(scope)
        current = [
            e.with_(score=score_at(e, when, self.policy), scored_at=when) for e in parsed.entries
        ]
        active = [e for e in current if status_of(e, self.policy) is Status.ACTIVE]
        archived = [e for e in current if status_of(e, self.policy) is not Status.ACTIVE]
        daily_files = await asyncio.to_thread(_count_daily, self.workspace.memory_dir(scope))
        return ScopeStatus(
            scope=scope,
            active=sorted(active, key=lambda e: -e.score),
            archived=sorted(archived, key=lambda e: -e.score),
            quarantined=list(parsed.quarantined),
            daily_files=daily_files,
            path=self.workspace.relative(self.store.path(scope)),
        )

    async def validate(self) -> list[ValidationProblem]:
        """Every quarantined block in every scope's long-term file."""
        problems: list[ValidationProblem] = []
        for scope in await self.scopes():
            parsed = await self.store.load(scope)
            rel = self.workspace.relative(self.store.path(scope))
            problems.extend(ValidationProblem(scope, rel, block) for block in parsed.quarantined)
        return problems


def _count_daily(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(1 for p in directory.glob("????-??-??.md"))
